"""Human units for bytes, rates and durations (SI, as storage and network people quote them)."""

from __future__ import annotations

import re
from decimal import Decimal

_PREFIXES = ("", "k", "M", "G", "T", "P", "E")


def si(value: float | int | str | None, unit: str, precision: int = 3) -> str:
    # Templates pass '' for a missing key (a run that has no summary yet): show a dash.
    try:
        value = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "–"
    index = 0
    while abs(value) >= 1000 and index < len(_PREFIXES) - 1:
        value /= 1000.0
        index += 1
    return f"{value:.{precision}g} {_PREFIXES[index]}{unit}"


def human_bytes(value: float | int | None) -> str:
    return si(value, "B")


def human_rate(value: float | None) -> str:
    return si(value, "B/s")


def share(value: float, digits: int = 0) -> str:
    """A fraction as the pages write percentages, with a space before the sign ("93 %")."""
    return f"{100.0 * value:.{digits}f} %"


def human_duration(seconds: float | str | None) -> str:
    try:
        seconds = float(seconds)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "–"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 90:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes:02d} min"
    return f"{minutes} min {secs:02d} s"


_SIZE_UNITS = {"": 1, "B": 1, "K": 1000, "M": 1000**2, "G": 1000**3, "T": 1000**4, "P": 1000**5}
# From 10^this many bytes no field takes a size, and its exact value is not worth computing
# ('1e999999999' would be a billion-digit integer).
_SIZE_DIGITS = 30


def parse_size(text: str) -> int:
    """'9 GB', '100MB', '1.5 TB', '4e9' or '1000' as a whole number of bytes (SI, like
    the pages show them; KiB/MiB/GiB are powers of two), exactly: decimal and integer
    arithmetic, never a float ('999999 PB' is 999,999 x 10^15 to the byte). Raises ValueError
    with a sentence; how large a size may be is each field's own rule."""
    cleaned = str(text).strip().replace(",", "").replace("_", "")
    match = re.fullmatch(r"(\d+(?:\.\d+)?(?:[eE]\d+)?)\s*([kKMGTP]?)(i?)[bB]?", cleaned)
    if not match:
        raise ValueError(f"{text!r} is not a size: write e.g. 100 MB, 9 GB or 1000000.")
    number, prefix, binary = match.groups()
    unit = _SIZE_UNITS[prefix.upper()]
    if binary:
        if not prefix:
            raise ValueError(f"{text!r} is not a size: write e.g. 100 MB, 9 GB or 1000000.")
        unit = 1024 ** ("KMGTP".index(prefix.upper()) + 1)
    amount = Decimal(number)  # exact: a Decimal made from text is the text's value
    # At least 10^adjusted times a unit of len(str(unit)) digits: known too large before it is computed.
    if amount and amount.adjusted() + len(str(unit)) - 1 >= _SIZE_DIGITS:
        raise ValueError(f"{text!r} is at least 10^{_SIZE_DIGITS} bytes: too large to be a size.")
    numerator, denominator = amount.as_integer_ratio()
    whole, rest = divmod(numerator * unit, denominator)
    if rest:
        raise ValueError(f"{text!r} is not a whole number of bytes.")
    return whole

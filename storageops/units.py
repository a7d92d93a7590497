"""Human units for bytes, rates and durations (SI, as storage and network people quote them)."""

from __future__ import annotations

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

"""The time window a host page shows: one of the fixed ranges, or an explicit from/to (a verdict's
evidence links to the host's charts over exactly the step it rests on)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils.dateparse import parse_datetime

RANGES = {"1h": 1, "6h": 6, "24h": 24, "7d": 24 * 7}
DEFAULT_RANGE = "6h"
MAX_WINDOW = timedelta(days=31)
# Around an explicit window, so the step is seen against what came just before and after it.
MARGIN_FRACTION = 0.5
MIN_MARGIN = timedelta(seconds=30)


@dataclass(frozen=True)
class Window:
    start: datetime
    end: datetime
    range: str  # the fixed range chosen, "" for an explicit window
    highlight: tuple[datetime, datetime] | None = None  # the explicit window itself
    note: str = ""  # why a window asked for was not used


def _explicit(params: Mapping[str, str]) -> tuple[tuple[datetime, datetime] | None, str]:
    raw_from, raw_to = params.get("from", ""), params.get("to", "")
    try:
        start, end = parse_datetime(raw_from), parse_datetime(raw_to)
    except ValueError:
        start = end = None
    if start is None or end is None or start.tzinfo is None or end.tzinfo is None:
        return None, "from and to must both be ISO 8601 times with a UTC offset, e.g. 2026-11-24T00:08:12+00:00"
    if not start < end:
        return None, "from must be before to"
    if end - start > MAX_WINDOW:
        return None, f"a window may span at most {MAX_WINDOW.days} days"
    return (start, end), ""


def chosen_window(params: Mapping[str, str], now: datetime) -> Window:
    """The window asked for in the query string; a bad one falls back to the default range, with
    the reason in ``note``."""
    note = ""
    if "from" in params or "to" in params:
        asked, note = _explicit(params)
        if asked is not None:
            start, end = asked
            margin = max((end - start) * MARGIN_FRACTION, MIN_MARGIN)
            return Window(start - margin, end + margin, "", highlight=asked)
        note = f"The window asked for is not shown: {note}."
    chosen = params.get("range", DEFAULT_RANGE)
    chosen = chosen if chosen in RANGES else DEFAULT_RANGE
    return Window(now - timedelta(hours=RANGES[chosen]), now, chosen, note=note)

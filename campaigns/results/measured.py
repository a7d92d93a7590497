"""A step's throughput over its measurement window, not over its warm-up.

A step with `RunStep.measured_from` (FTS: when its copies in flight first reached the step's
concurrency) is measured over [measured_from, its last end]: its throughput is the bytes its
successful copies moved inside that window over the window's length. A copy that began in the
warm-up counts from measured_from on, its bytes spread evenly over its own duration (as the
time buckets spread them, so the live figure and the final one are the same reading). The
step's counts and its `bytes` stay the whole step's: what it copied; `measured_bytes` is what
the throughput is made of. Steps without measured_from are measured over their active window,
as before (campaigns.results.analysis).
"""

from __future__ import annotations

from datetime import UTC, datetime


def bytes_within(moved: float, started: float, finished: float, since: float) -> float:
    """The part of a copy's `moved` bytes that fell at or after `since` (epoch seconds), its
    bytes spread evenly over [started, finished]."""
    if finished <= since:
        return 0.0
    if started >= since:
        return float(moved)
    span = finished - started
    return moved * (finished - since) / span if span > 0 else float(moved)


def apply(row: dict, since: float, moved: float, window_seconds: float) -> dict:
    """Give a step row the figures of its measurement window, which starts at `since` (epoch
    seconds), lasts `window_seconds` (to the step's last end, less any excluded time) and saw
    `moved` bytes. The row's counts and its whole-step bytes are left as they are."""
    row["measured_from"] = datetime.fromtimestamp(since, tz=UTC).isoformat()
    row["measured_bytes"] = round(moved)
    row["window_seconds"] = round(window_seconds, 3)
    row["throughput_bps"] = moved / window_seconds if window_seconds > 0 else None
    return row

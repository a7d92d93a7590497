"""A step's throughput over its measurement window, not over its warm-up.

A step with `RunStep.measured_from` (FTS: when its copies in flight first reached the step's
concurrency) is measured over [measured_from, its drain] (campaigns.results.concurrency: the
first end after its last start; its last end while it still copies): its throughput is the
bytes its successful copies moved inside that window over the window's length. A copy that
began in the warm-up counts from measured_from on, one still running at the drain up to there,
its bytes spread evenly over its own duration (as the
time buckets spread them, so the live figure and the final one are the same reading). The
step's counts and its `bytes` stay the whole step's: what it copied; `measured_bytes` is what
the throughput is made of. Steps without measured_from are measured over their active window,
as before (campaigns.results.analysis).
"""

from __future__ import annotations

from datetime import UTC, datetime


def bytes_within(moved: float, started: float, finished: float, since: float, until: float | None = None) -> float:
    """The part of a copy's `moved` bytes that fell within [since, until] (epoch seconds; until
    None: no end), its bytes spread evenly over [started, finished]."""
    end = finished if until is None else min(finished, until)
    if finished <= since or (until is not None and started >= until):
        return 0.0
    begin = max(started, since)
    if begin == started and end == finished:
        return float(moved)
    span = finished - started
    return moved * (end - begin) / span if span > 0 else float(moved)


def apply(row: dict, since: float, moved: float, window_seconds: float) -> dict:
    """Give a step row the figures of its measurement window, which starts at `since` (epoch
    seconds), lasts `window_seconds` (to the step's drain, less any excluded time) and saw
    `moved` bytes. The row's counts and its whole-step bytes are left as they are."""
    row["measured_from"] = datetime.fromtimestamp(since, tz=UTC).isoformat()
    row["measured_bytes"] = round(moved)
    row["window_seconds"] = round(window_seconds, 3)
    row["throughput_bps"] = moved / window_seconds if window_seconds > 0 else None
    return row

"""The concurrency a step really ran at, read from the transfers' own start and end times.

A step claims a concurrency; what the storage saw is how many copies were in flight. For each
step: the time-weighted mean of copies in flight over the step's active window (its first
start to its last end) and the most that were ever in flight at once. A step whose mean is
more than OFF_TARGET off its target is flagged: its throughput belongs to another concurrency.

A step with `RunStep.measured_from` (FTS: when its copies in flight first reached the step's
concurrency, FTS applying a link limit only at its optimizer's next pass) is measured over
[measured_from, its drain]: the warm-up before is left out, and each row says how long it was.
Its drain starts once every file of the step has started and the first copy ends after the last
start: no file is left to refill that slot, so the copies in flight fall off because the step ran
out of files, not because the storage or FTS held them back. Counting that tail put a step of 4
run by FTS at 3.5 (a slot per copy length empties in turn), flagged off target. A step still
copying, or a run's copies still under way, is measured to its last end until it is done.

A cancelled run's steps are measured up to its cancel (Run.cancel_requested_at) at the latest:
the seconds its dying copies take after it are no concurrency the step ran at.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import NamedTuple

from django.db.models import Max, Min

from campaigns.choices import TransferState
from campaigns.models import Run, RunStep, Transfer

OFF_TARGET = 0.10
# Copies that ran: a skipped transfer never started; a cancelled one may have.
_RAN = (TransferState.SUCCEEDED, TransferState.FAILED, TransferState.CANCELLED)


def in_flight(intervals: Iterable[tuple[float, float]]) -> tuple[float | None, int]:
    """(time-weighted mean, maximum) of intervals in flight over their joint window.

    The mean is the copies' busy time over the window from the first start to the last end.
    At equal times an end is taken before a start: a copy that begins the instant another
    ends takes its slot, it does not run beside it.
    """
    edges: list[tuple[float, int]] = []
    busy = 0.0
    for start, end in intervals:
        end = max(end, start)
        busy += end - start
        edges.append((start, 1))
        edges.append((end, -1))
    if not edges:
        return None, 0
    edges.sort()
    level = peak = 0
    for _, delta in edges:
        level += delta
        peak = max(peak, level)
    span = edges[-1][0] - edges[0][0]
    return (busy / span if span > 0 else float(peak)), peak


Intervals = dict[int, list[tuple[float, float]]]


def ran(state: str, step: int | None, started, finished) -> bool:
    """Whether a row is a copy that ran within a step (what the figures are read from)."""
    return step is not None and state in _RAN and started is not None and finished is not None


def intervals_of(run: Run) -> Intervals:
    """Per step index, the (start, end) epochs of its copies that ran."""
    intervals: Intervals = defaultdict(list)
    rows = (
        Transfer.objects.filter(run=run, state__in=_RAN, started_at__isnull=False, finished_at__isnull=False)
        .exclude(step=None)
        .values_list("step", "started_at", "finished_at")
        .order_by()
        .iterator(chunk_size=20000)
    )
    for step, started, finished in rows:
        intervals[step].append((started.timestamp(), finished.timestamp()))
    return intervals


class Window(NamedTuple):
    """A measured step's times in epoch seconds: its start, its measurement start
    (measured_from) and its drain start (None while the step is still copying)."""

    started: float
    since: float
    until: float | None


def cancel_at(run: Run) -> float | None:
    """When the run's cancel was asked for (epoch seconds): where its figures stop; None when
    it was never cancelled."""
    at = run.cancel_requested_at
    return at.timestamp() if at is not None else None


def measured_windows(run: Run) -> dict[int, Window]:
    """Per step index with a measurement start, its measurement window (to its drain, or to
    the run's cancel where that came first)."""
    rows = RunStep.objects.filter(run=run, measured_from__isnull=False)
    rows = rows.values_list("index", "started_at", "measured_from")
    stop = cancel_at(run)
    out = {}
    for index, started, measured in rows:
        since = measured.timestamp()
        until = drain_start(run, index)
        if stop is not None and stop > since and (until is None or stop < until):
            until = stop
        out[index] = Window(started.timestamp(), since, until if until is not None and until > since else None)
    return out


def drain_start(run: Run, step: int) -> float | None:
    """When step `step` began to drain (epoch seconds): the first end, after its last copy
    started, of one of its copies; None while any of its files is queued or copying."""
    rows = Transfer.objects.filter(run=run, step=step)
    if rows.filter(state__in=(TransferState.QUEUED, TransferState.ACTIVE)).exists():
        return None
    ran_rows = rows.filter(state__in=_RAN, started_at__isnull=False, finished_at__isnull=False)
    last_start = ran_rows.aggregate(at=Max("started_at"))["at"]
    if last_start is None:
        return None
    # Strictly after: an end at the very instant of the last start is the slot it took over.
    first_end = ran_rows.filter(finished_at__gt=last_start).aggregate(at=Min("finished_at"))["at"]
    return first_end.timestamp() if first_end is not None else None


def clipped(
    intervals: Iterable[tuple[float, float]], start: float, end: float | None = None
) -> list[tuple[float, float]]:
    """The parts of the intervals within [start, end] (a copy that began in the warm-up counts
    from `start`, one still running at the drain up to `end`); `end` None: no end."""
    if end is None:
        return [(max(a, start), b) for a, b in intervals if b > start]
    return [(max(a, start), min(b, end)) for a, b in intervals if b > start and a < end]


def with_achieved(
    run: Run,
    steps: list[dict],
    intervals: Intervals | None = None,
    achieved: dict[int, tuple[float | None, int | None]] | None = None,
    windows: dict[int, Window] | None = None,
) -> list[dict]:
    """The step rows with their achieved concurrency, and a flag where it is off target.
    `intervals`: the copies' times when the caller already read the rows; `achieved`: the
    (mean, peak) per step when the caller has them without the rows (a peak of None: unknown);
    else the rows are read here; `windows`: the measured steps' windows when the caller read them."""
    windows = measured_windows(run) if windows is None else windows
    if achieved is None:
        intervals = intervals_of(run) if intervals is None else intervals
        stop = cancel_at(run)
        achieved = {}
        for row in steps:
            own = intervals.get(row["step"], ())
            if (window := windows.get(row["step"])) is not None:
                own = clipped(own, window.since, window.until)
            elif stop is not None:
                own = [(a, min(b, stop)) for a, b in own if a < stop]
            achieved[row["step"]] = in_flight(own)
    for row in steps:
        window = windows.get(row["step"])
        row["warmup_seconds"] = round(max(window.since - window.started, 0.0), 1) if window is not None else None
        mean, peak = achieved.get(row["step"], (None, 0))
        row["achieved_mean"] = round(mean, 3) if mean is not None else None
        row["achieved_max"] = peak
        row["off_target"] = is_off_target(mean, row.get("concurrency"))
    return steps


def is_off_target(mean: float | None, target: int | None) -> bool:
    """Whether copies in flight `mean` is more than OFF_TARGET from the `target` concurrency."""
    return bool(target and mean is not None and abs(mean - target) / target > OFF_TARGET)


# -- reading a step row ---------------------------------------------------------------------
# Every table, export and verdict reads a step's achieved concurrency through these, never
# from the row's keys: a summary stored before the figures existed has none, and the way they
# are computed (e.g. measured only after a step's warm-up) changes here alone.
def achieved(step: dict) -> tuple[float | None, int | None, bool]:
    """(mean, max, off target) of a step row; (None, None, False) where it was never measured."""
    return step.get("achieved_mean"), step.get("achieved_max"), bool(step.get("off_target"))


def x(step: dict) -> float | None:
    """Where a step sits on a concurrency curve: the copies it really had in flight on average,
    or its target where that was never measured (a summary stored before achieved figures)."""
    mean = step.get("achieved_mean")
    return mean if mean is not None else step.get("concurrency")


def off_target(steps: list[dict]) -> list[dict]:
    """The steps whose achieved mean is more than OFF_TARGET from their target."""
    return [s for s in steps if achieved(s)[2]]


def achieved_text(step: dict) -> str:
    """The text "1.48 in flight (max 3), off target": what a table shows of a step's achieved concurrency."""
    mean, peak, off = achieved(step)
    if mean is None:
        return "–"
    text = f"{mean:.2f} in flight" + (f" (max {peak})" if peak is not None else "")
    return text + (", off target" if off else "")


def ran_at(step: dict) -> str:
    """The text "4 (ran at 1.48)" for an off-target step of target 4, "4" for one on target: how
    sentences and tables name a step's concurrency."""
    mean, _, off = achieved(step)
    return f"{step.get('concurrency')}" + (f" (ran at {mean:.2f})" if off and mean is not None else "")

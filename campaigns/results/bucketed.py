"""A run's figures read from its time buckets (campaigns.models.buckets), never from its rows:
the live page's timeline and step table, a live run's summary and verdict, trimmed comparisons.

Precision. Untrimmed, every count, byte sum, first start, last end and busy time is the rows'
own (buckets sum them without loss); only the percentiles and the peak number of copies in
flight need the rows, and come with the summary stored when the run ends. Trimmed, the cuts
(warm-up, tail, the margins around events) are widened to whole buckets: 1 s for a run of up to
TRIM_FINE_SPAN, 60 s beyond. What is kept is the time between the cuts, not whole copies: the
bytes moved inside the kept seconds (each copy's spread evenly over its duration) over the kept
active time, and the copies that ended inside it.

The buckets are read as group rows (per step, door, state and error category, with counts,
bytes, first start and last end) and merged here into a total, a door or a step row: counts
and sums, so hundreds of thousands of rows never come into Python. Percentiles would need
every duration, so these rows leave them out; a finished run's stored summary has them.

A step measured after its warm-up (RunStep.measured_from) is read from there, as the final
summary reads it from the rows (campaigns.results.measured) to its drain: its throughput and
achieved mean from the buckets from measured_from to the drain, the buckets they fall in counted
for the part inside (their bytes and busy time spread evenly within them, as a copy's are over
its duration).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from django.db.models import F, Max, Min, Q, Sum

from campaigns.choices import TransferState
from campaigns.models import Run, TransferBucket
from campaigns.results import concurrency, measured
from campaigns.results.analysis import active_window, door_names, figures
from campaigns.spec import RunSpec

TRIM_FINE_SPAN = 6 * 3600
_CANCELLED = Q(category="cancelled")


def source_width(width: int) -> int:
    """The stored width a chart bucket of `width` seconds is summed from (both align to the epoch)."""
    return 60 if width % 60 == 0 else 1


def timeline_rows(run: Run, width: int) -> list[tuple[int, int, float, float, int]]:
    """(door endpoint id, bucket, bytes, busy seconds, failures) per door and chart bucket."""
    door = f"{RunSpec.of(run).door_side}_endpoint_id"
    sw = source_width(width)
    rows = (
        TransferBucket.objects.filter(run=run, width=sw)
        .annotate(chart_k=F("k") * sw / width)
        .values(door, "chart_k")
        .annotate(moved_sum=Sum("moved"), busy_sum=Sum("busy"), failed_sum=Sum("files_failed"))
        .order_by()
    )
    return [
        (r[door], int(r["chart_k"]), float(r["moved_sum"] or 0), float(r["busy_sum"] or 0), int(r["failed_sum"] or 0))
        for r in rows
    ]


def trim_width(run: Run, span_seconds: float) -> int:
    """1 s buckets for a run of up to TRIM_FINE_SPAN, while it has them (retention keeps only
    the 60 s ones); 60 s otherwise."""
    fine = span_seconds <= TRIM_FINE_SPAN and TransferBucket.objects.filter(run=run, width=1).exists()
    return 1 if fine else 60


def kept(width: int, start: float, end: float, excluded: Iterable[tuple[float, float]]) -> Q:
    """The buckets wholly between `start` and `end` (epoch seconds) and outside every excluded
    interval: each cut widened to whole buckets."""
    q = Q()
    if start > -math.inf:
        q &= Q(k__gte=math.ceil(start / width))
    if end < math.inf:
        q &= Q(k__lte=math.floor(end / width) - 1)
    for lo, hi in excluded:
        q &= ~Q(k__gte=math.floor(lo / width), k__lte=math.ceil(hi / width) - 1)
    return q


def widened(width: int, excluded: Iterable[tuple[float, float]]) -> list[tuple[datetime, datetime]]:
    """Excluded intervals as `kept` cuts them, to take out of the active windows."""
    return [(_dt(math.floor(lo / width) * width), _dt(math.ceil(hi / width) * width)) for lo, hi in excluded]


def groups(run: Run, by: tuple[str, ...], width: int = 60, keep: Q | None = None) -> list[dict]:
    """Rows shaped as `merged` and `step_table` read them (per *by, state and error
    category: n, moved, first, last over what `keep` selects; n_all, moved_all over all), and
    beside them the busy seconds and the span of every copy that ran (cancelled ones too),
    from which the achieved concurrency comes."""
    keep = keep if keep is not None else Q()
    finished = keep & ~_CANCELLED
    rows = (
        TransferBucket.objects.filter(run=run, width=width)
        .values(*by, "category")
        .annotate(
            ok=Sum("files_ok", filter=keep),
            failed=Sum("files_failed", filter=keep),
            moved_kept=Sum("moved", filter=keep),
            first=Min("first_start", filter=finished),
            last=Max("last_end", filter=finished),
            busy_kept=Sum("busy", filter=keep),
            ran_first=Min("first_start", filter=keep),
            ran_last=Max("last_end", filter=keep),
            ok_all=Sum("files_ok"),
            failed_all=Sum("files_failed"),
            moved_all=Sum("moved"),
        )
        .order_by()
    )
    out = []
    for r in rows:
        common = {key: (None if key == "step" and r[key] == -1 else r[key]) for key in by}
        common.update(
            error_category=r["category"],
            first=_dt(r["first"]),
            last=_dt(r["last"]),
            busy=r["busy_kept"] or 0.0,
            ran_first=r["ran_first"],
            ran_last=r["ran_last"],
        )
        out.append({**common, "state": "succeeded", "n": r["ok"] or 0, "moved": r["moved_kept"] or 0.0,
                    "n_all": r["ok_all"] or 0, "moved_all": r["moved_all"] or 0.0})  # fmt: skip
        # Busy time belongs to the group once: the failed row of the pair carries none.
        out.append({**common, "state": "failed", "n": r["failed"] or 0, "moved": 0.0, "n_all": r["failed_all"] or 0,
                    "moved_all": 0.0, "busy": 0.0})  # fmt: skip
    return out


def achieved(rows: list[dict], cut: Iterable[tuple[datetime, datetime]] = ()) -> dict[int, tuple[float | None, None]]:
    """Per step: the mean number of copies in flight (their busy time over the span from the
    first start to the last end, less the cut intervals, as campaigns.results.concurrency reads
    it from the rows) and no peak, which only the rows give."""
    busy: dict[int, float] = defaultdict(float)
    span: dict[int, tuple[float, float]] = {}
    for r in rows:
        if r.get("step") is None or r["ran_first"] is None:
            continue
        busy[r["step"]] += r["busy"]
        lo, hi = span.get(r["step"], (math.inf, -math.inf))
        span[r["step"]] = (min(lo, r["ran_first"]), max(hi, r["ran_last"]))
    cut = [(lo.timestamp(), hi.timestamp()) for lo, hi in cut]
    means = {}
    for step, (lo, hi) in span.items():
        seconds = hi - lo - sum(max(min(hi, b) - max(lo, a), 0.0) for a, b in cut)
        means[step] = (busy[step] / seconds if seconds > 0 else None, None)
    return means


@dataclass(frozen=True)
class Window:
    """What the buckets say of a step within its measurement window."""

    since: float
    moved: float
    busy: float
    last_end: float | None  # of its copies that ended (not cancelled), or its drain: where its window ends
    ran_last: float | None  # of every copy that ran, or its drain: where its span in flight ends


def measured_windows(run: Run, width: int, keep: Q | None = None) -> dict[int, Window]:
    """Per step with a measurement start, its buckets from there to its drain (one query a step:
    FTS steps are few). The buckets the window's ends fall in count for the part inside it (their
    bytes and busy time spread evenly within them, as a copy's are over its duration). Untrimmed
    (no `keep`), read from the 1 s buckets where the run still has them."""
    windows = concurrency.measured_windows(run)
    if windows and keep is None and TransferBucket.objects.filter(run=run, width=1).exists():
        width = 1
    out = {}
    for step, window in windows.items():
        since, until = window.since, window.until
        first = math.floor(since / width)
        last = math.floor(until / width) if until is not None else None
        buckets = TransferBucket.objects.filter(run=run, width=width, step=step, k__gte=first)
        if last is not None:
            buckets = buckets.filter(k__lte=last)
        if keep is not None:
            buckets = buckets.filter(keep)
        edges = {first, last} - {None}
        sums = buckets.aggregate(
            inner_moved=Sum("moved", filter=~Q(k__in=edges)),
            inner_busy=Sum("busy", filter=~Q(k__in=edges)),
            ended_last=Max("last_end", filter=~_CANCELLED),
            any_last=Max("last_end"),
        )
        moved = sums["inner_moved"] or 0.0
        busy = sums["inner_busy"] or 0.0
        edge_rows = buckets.filter(k__in=edges).values("k").annotate(m=Sum("moved"), b=Sum("busy")).order_by()
        for edge in edge_rows:
            # The share of an edge bucket that lies inside [since, until].
            lo = max(edge["k"] * width, since)
            hi = (edge["k"] + 1) * width if until is None else min((edge["k"] + 1) * width, until)
            part = max(hi - lo, 0.0) / width
            moved += (edge["m"] or 0.0) * part
            busy += (edge["b"] or 0.0) * part
        out[step] = Window(
            since=since,
            moved=moved,
            busy=busy,
            last_end=until if until is not None else sums["ended_last"],
            ran_last=until if until is not None else sums["any_last"],
        )
    return out


def _window_seconds(since: float, end: float | None, cut: list[tuple[datetime, datetime]]) -> float:
    if end is None or end <= since:
        return 0.0
    return active_window(_dt(since), _dt(end), cut)


def merged(rows: Iterable[dict], excluded: Iterable[tuple[datetime, datetime]] = ()) -> dict:
    """The figures of a set of group rows, with their failures per category."""
    rows = list(rows)
    firsts = [r["first"] for r in rows if r["first"]]
    lasts = [r["last"] for r in rows if r["last"]]
    errors: Counter = Counter()
    for r in rows:
        if r["state"] == TransferState.FAILED and r["n"]:
            errors[r["error_category"] or "other"] += r["n"]
    return {
        **figures(
            ok=sum(r["n"] for r in rows if r["state"] == TransferState.SUCCEEDED),
            failed=sum(r["n"] for r in rows if r["state"] == TransferState.FAILED),
            moved=round(sum(r["moved"] or 0 for r in rows)),
            first=min(firsts) if firsts else None,
            last=max(lasts) if lasts else None,
            excluded=excluded,
        ),
        "errors": dict(errors.most_common()),
    }


def step_table(
    run: Run,
    rows: list[dict],
    excluded: Iterable[tuple[datetime, datetime]] = (),
    achieved: dict[int, tuple[float | None, int | None]] | None = None,
) -> list[dict]:
    """The step rows of a run from groups that include "step", each with its concurrency and
    the concurrency it achieved (`achieved` per step, else read from the rows)."""
    spec, excluded = RunSpec.of(run), list(excluded)
    # A step whose every copy a trim left out has no figure to show (as in analysis.run_summary):
    # a throughput of 0 there would draw a collapse that never happened.
    indexes = sorted({r["step"] for r in rows if r["step"] is not None and r["n"]})
    return concurrency.with_achieved(
        run,
        [{"step": k, **spec.step_point(k), **merged((r for r in rows if r["step"] == k), excluded)} for k in indexes],
        achieved=achieved,
    )


def tables(run: Run, width: int = 60, keep: Q | None = None, cut: Iterable[tuple[datetime, datetime]] = ()) -> dict:
    """The total, step and door figures of a run (without percentiles) over the buckets `keep`
    selects, less the `cut` intervals in the active windows; with what was left out."""
    cut, door_side = list(cut), RunSpec.of(run).door_side
    side = f"{door_side}_endpoint_id"
    rows = groups(run, ("step", side), width, keep)
    windows = measured_windows(run, width, keep)
    means = achieved(rows, cut)
    for step, window in windows.items():
        seconds = _window_seconds(window.since, window.ran_last, cut)
        means[step] = (window.busy / seconds if seconds > 0 else None, None)
    steps = step_table(run, rows, cut, achieved=means)
    for row in steps:
        if (window := windows.get(row["step"])) is not None:
            measured.apply(row, window.since, window.moved, _window_seconds(window.since, window.last_end, cut))
    total = merged(rows, cut)
    endpoint_ids = {r[side] for r in rows}
    names = door_names(endpoint_ids)
    doors = {names.get(e, str(e)): merged((r for r in rows if r[side] == e), cut) for e in endpoint_ids}
    return {
        "total": {**total, "duration_p50": None, "duration_p95": None},
        "steps": steps,
        "doors": dict(sorted(doors.items())),
        "door_side": door_side,
        "left_out": {
            "transfers": sum(r["n_all"] for r in rows) - (total["files_ok"] + total["files_failed"]),
            "bytes": round(sum(r["moved_all"] for r in rows)) - total["bytes"],
        },
    }


def _dt(epoch: float | None) -> datetime | None:
    return None if epoch is None else datetime.fromtimestamp(epoch, tz=UTC)

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

A cancelled run's figures stop at its cancel, as the final summary's do (campaigns.results.
analysis): a window that runs past it ends there, with the bytes and busy time before it (the
bucket it falls in counted for its part before it).
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
from campaigns.results import concurrency, measured, step_points
from campaigns.results.analysis import active_window, door_names, figures, stopped
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
            cancelled=Sum("files_cancelled", filter=keep),
            moved_kept=Sum("moved", filter=keep),
            first=Min("first_start", filter=finished),
            last=Max("last_end", filter=finished),
            busy_kept=Sum("busy", filter=keep),
            ran_first=Min("first_start", filter=keep),
            ran_last=Max("last_end", filter=keep),
            ok_all=Sum("files_ok"),
            failed_all=Sum("files_failed"),
            cancelled_all=Sum("files_cancelled"),
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
        out.append({**common, "state": "cancelled", "n": r["cancelled"] or 0, "moved": 0.0,
                    "n_all": r["cancelled_all"] or 0, "moved_all": 0.0, "busy": 0.0})  # fmt: skip
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
            cancelled=sum(r["n"] for r in rows if r["state"] == TransferState.CANCELLED),
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
    recorded = step_points.step_points(run, spec)
    # A step whose every copy a trim left out has no figure to show (as in analysis.run_summary):
    # a throughput of 0 there would draw a collapse that never happened.
    indexes = sorted({r["step"] for r in rows if r["step"] is not None and r["n"]})
    return concurrency.with_achieved(
        run,
        [
            {
                "step": k,
                **step_points.columns(recorded, spec, k),
                **merged((r for r in rows if r["step"] == k), excluded),
            }
            for k in indexes
        ],
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
    stop = concurrency.cancel_at(run)
    if stop is not None:
        for step in {r["step"] for r in rows if r["step"] is not None} - set(windows):
            means.update(_achieved_until(run, width, keep, stop, cut, [r for r in rows if r["step"] == step], step))
    steps = step_table(run, rows, cut, achieved=means)
    for row in steps:
        if (window := windows.get(row["step"])) is not None:
            measured.apply(row, window.since, window.moved, _window_seconds(window.since, window.last_end, cut))
            if stop is not None and window.last_end == stop:  # the cancel ended its window
                row["until_cancel"] = _dt(stop).isoformat()
        elif stop is not None:
            own = [r for r in rows if r["step"] == row["step"]]
            _until_cancel(run, width, keep, stop, cut, row, own, step=row["step"])
    total = merged(rows, cut)
    endpoint_ids = {r[side] for r in rows}
    names = door_names(endpoint_ids)
    doors = {names.get(e, str(e)): merged((r for r in rows if r[side] == e), cut) for e in endpoint_ids}
    if stop is not None:
        _until_cancel(run, width, keep, stop, cut, total, rows)
        for e in endpoint_ids:
            _until_cancel(run, width, keep, stop, cut, doors[names.get(e, str(e))], [r for r in rows if r[side] == e],
                          **{side: e})  # fmt: skip
    return {
        "total": {**total, "duration_p50": None, "duration_p95": None},
        "steps": steps,
        "doors": dict(sorted(doors.items())),
        "door_side": door_side,
        "left_out": {
            "transfers": sum(r["n_all"] for r in rows)
            - (total["files_ok"] + total["files_failed"] + total["files_cancelled"]),
            "bytes": round(sum(r["moved_all"] for r in rows)) - total["bytes"],
        },
    }


def _before(run: Run, width: int, keep: Q | None, stop: float, **where) -> tuple[float, float]:
    """(bytes moved, busy seconds) in the buckets `where` selects up to `stop` (epoch seconds),
    the bucket it falls in counted for its part before it. Untrimmed, from the 1 s buckets
    where the run still has them."""
    if keep is None and TransferBucket.objects.filter(run=run, width=1).exists():
        width = 1
    edge = math.floor(stop / width)
    buckets = TransferBucket.objects.filter(run=run, width=width, k__lte=edge, **where)
    if keep is not None:
        buckets = buckets.filter(keep)
    sums = buckets.aggregate(
        inner_moved=Sum("moved", filter=~Q(k=edge)),
        inner_busy=Sum("busy", filter=~Q(k=edge)),
        edge_moved=Sum("moved", filter=Q(k=edge)),
        edge_busy=Sum("busy", filter=Q(k=edge)),
    )
    part = (stop - edge * width) / width
    moved = (sums["inner_moved"] or 0.0) + (sums["edge_moved"] or 0.0) * part
    busy = (sums["inner_busy"] or 0.0) + (sums["edge_busy"] or 0.0) * part
    return moved, busy


def _until_cancel(
    run: Run, width: int, keep: Q | None, stop: float, cut: list, row: dict, rows: list[dict], **where
) -> None:
    """A figure row whose window runs past the cancel at `stop`: its window and throughput up to
    there (analysis.stopped)."""
    firsts = [r["first"] for r in rows if r["first"]]
    lasts = [r["last"] for r in rows if r["last"]]
    if not firsts or max(lasts).timestamp() <= stop:
        return
    first = min(firsts).timestamp()
    moved, _ = _before(run, width, keep, stop, **where)
    stopped(row, stop, moved, _window_seconds(first, max(stop, first), cut))


def _achieved_until(
    run: Run, width: int, keep: Q | None, stop: float, cut: list, rows: list[dict], step: int
) -> dict[int, tuple[float | None, None]]:
    """A step whose copies ran past the cancel at `stop`: its mean in flight up to there."""
    firsts = [r["ran_first"] for r in rows if r["ran_first"] is not None]
    lasts = [r["ran_last"] for r in rows if r["ran_last"] is not None]
    if not firsts or max(lasts) <= stop:
        return {}
    lo = min(firsts)
    _, busy = _before(run, width, keep, stop, step=step)
    seconds = stop - lo - sum(max(min(stop, b.timestamp()) - max(lo, a.timestamp()), 0.0) for a, b in cut)
    return {step: (busy / seconds if seconds > 0 else None, None)}


def _dt(epoch: float | None) -> datetime | None:
    return None if epoch is None else datetime.fromtimestamp(epoch, tz=UTC)

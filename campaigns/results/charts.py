"""What the pages' charts read: a run's timeline, error mix, duration-vs-size sample, the doors'
host metrics and the events to draw on them, and a sweep's steps as series either way round
(the step table itself and the choice between a stored and a computed timeline are readers').

Every figure comes from the run's time buckets (campaigns.results.bucketed), from bounded
lookups (the scatter's sample), or from what was stored when the run ended (RunStep,
Run.summary, RunChart): a page of a million-transfer run never reads its rows.
Times are epoch milliseconds, what Chart.js' time axis takes as it is.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta

from django.db.models import Count, Min, Sum

from campaigns import sweeps
from campaigns.choices import TransferState
from campaigns.models import Run, RunChart, Transfer, TransferBucket
from campaigns.results import analysis, bucketed, concurrency, disturbance
from campaigns.results.scope import run_scope, run_window
from campaigns.spec import RunSpec
from collectors.choices import DISTURBING_KINDS
from collectors.metric_series import host_series, labelled_series
from storageops.buckets import bucket_seconds

ROLLING_BUCKETS = 5
SCATTER_POINTS = 1500


def compute_timeline(run: Run) -> dict:
    """Throughput per door and in total (with its rolling mean), copies in flight and
    failures, on one time axis of round buckets."""
    window = run_window(run)
    if window is None:
        return {"bucket_seconds": None, "times": [], "doors": {}, "total": [], "rolling": [], "active": []}
    width = bucket_seconds((window[1] - window[0]).total_seconds())
    rows = bucketed.timeline_rows(run, width)
    if not rows:
        return {"bucket_seconds": width, "times": [], "doors": {}, "total": [], "rolling": [], "active": []}
    first, last = min(r[1] for r in rows), max(r[1] for r in rows)
    count = last - first + 1
    names = analysis.door_names({r[0] for r in rows})
    doors: dict[str, list[float]] = defaultdict(lambda: [0.0] * count)
    total, active, failures = [0.0] * count, [0.0] * count, [0] * count
    for door, k, moved, busy, failed in rows:
        i = k - first
        doors[names.get(door, str(door))][i] += moved / width
        total[i] += moved / width
        active[i] += busy / width
        failures[i] += failed
    return {
        "bucket_seconds": width,
        "door_side": RunSpec.of(run).door_side,
        "times": [(first + i + 0.5) * width * 1000 for i in range(count)],
        "doors": dict(sorted(doors.items())),
        "total": total,
        "rolling": analysis.rolling_mean(total, ROLLING_BUCKETS),
        "rolling_buckets": ROLLING_BUCKETS,
        "active": active,
        "failures": failures,
    }


def store_timeline(run: Run) -> RunChart:
    """Computed once when a run ends (the driver calls this), read by every later view."""
    chart, _ = RunChart.objects.update_or_create(run=run, defaults={"data": compute_timeline(run)})
    return chart


def error_mix(run: Run) -> list[dict]:
    """Failures per category, most frequent first: summed from the run's minute buckets."""
    rows = (
        TransferBucket.objects.filter(run=run, width=60, files_failed__gt=0)
        .values("category")
        .annotate(count=Sum("files_failed"))
        .order_by("-count", "category")
    )
    return [{"category": r["category"] or "other", "count": r["count"]} for r in rows]


def error_messages(run: Run, category: str, limit: int = 20) -> list[dict]:
    """The raw messages of one category, the most frequent first, each with an example transfer."""
    rows = (
        Transfer.objects.filter(run=run, state=TransferState.FAILED, error_category=category)
        .values("error_message")
        .annotate(count=Count("pk"), example=Min("index"))
        .order_by("-count")[:limit]
    )
    return list(rows)


def scatter(run: Run, points: int = SCATTER_POINTS) -> dict:
    """Duration against size of an evenly spaced sample of successful copies: looked up by
    index through the unique (run, index) key, however many copies the run has."""
    stride = max(1, -(-run.planned_files // points))
    retry = RunSpec.of(run).retry  # a retry plans some indices of its first run only
    indexes = list(retry.indices[::stride]) if retry else list(range(0, run.planned_files, stride))
    rows = Transfer.objects.filter(run=run, index__in=indexes, state=TransferState.SUCCEEDED).values_list(
        "size", "duration", "step"
    )
    return {
        "sampled_every": stride,
        "points": [{"x": size, "y": duration, "step": step} for size, duration, step in rows if duration is not None],
    }


def event_mark(e) -> dict:
    """An event as a chart draws it: a vertical line at its time, labelled."""
    return {
        "time": e.time.timestamp() * 1000,
        "kind": e.kind,
        "label": e.get_kind_display(),
        "summary": e.summary,
        "host": e.host.name if e.host else None,
        "disturbing": e.kind in DISTURBING_KINDS,
    }


def events(run: Run) -> list[dict]:
    """Every event of the run's hosts, backends and endpoints in its window, for the annotations."""
    return [event_mark(e) for e in disturbance.scope_events(run, kinds=None)]


def hosts(run: Run) -> dict:
    """CPU, load and network of the run's hosts over its window, in the timeline's buckets."""
    window = run_window(run)
    host_ids = run_scope(run).hosts
    if window is None or not host_ids:
        return {"bucket_seconds": None, "hosts": [], "metrics": {}, "labelled": {}}
    width = bucket_seconds((window[1] - window[0]).total_seconds())
    margin = timedelta(seconds=width)
    return {
        "bucket_seconds": width,
        "hosts": sorted(host_ids),
        "metrics": host_series(host_ids, window[0] - margin, window[1] + margin, width),
        "labelled": labelled_series(host_ids, window[0] - margin, window[1] + margin, width),
    }


# -- a sweep's steps as series --------------------------------------------------------------
# Either way round: throughput against concurrency, one line per setting of the other knobs, or
# against a swept knob (streams, TCP buffer, mode), one line per concurrency. Tokyo plotted
# gridFTP streams against clients both ways; so does a run.
def curve_point(step: dict) -> dict:
    """A step on a throughput-against-concurrency chart: at the concurrency it achieved (its
    mean in flight), its target beside it for the label; a step of 4 that ran at 1.48 is drawn
    at 1.48, not at 4."""
    return {"x": concurrency.x(step), "y": step["throughput_bps"], "target": step.get("concurrency")}


def series(steps: list[dict], x: str, axes: list[str]) -> list[dict]:
    """One line per combination of the dimensions other than `x`, its points in x order."""
    others = [d for d in ["concurrency", *axes] if d != x]
    lines: dict[tuple, list[dict]] = {}
    for s in steps:
        if s.get("throughput_bps") is None or s.get(x) is None:
            continue
        point = curve_point(s) if x == "concurrency" else {"x": s[x], "y": s["throughput_bps"]}
        lines.setdefault(tuple(s.get(d) for d in others), []).append({**point, "step": s["step"]})
    return [
        {"label": " · ".join(f"{sweeps.AXIS_LABELS.get(d, d)} {sweeps.value_text(d, v)}"
                              for d, v in zip(others, key, strict=True)),
         "points": sorted(points, key=_x_order)}
        for key, points in sorted(lines.items(), key=lambda item: [str(v) for v in item[0]])
    ]  # fmt: skip


def _x_order(point: dict) -> tuple:
    # Numbers in their order (an achieved 1.92 between the targets 1 and 4), names after them.
    x = point["x"]
    return (0, x, "") if isinstance(x, int | float) and not isinstance(x, bool) else (1, 0, str(x))


def steps_chart(steps: list[dict], axes: list[str]) -> dict:
    """The steps chart's data: the table, and with a sweep its series by each dimension."""
    if not axes:
        return {"steps": steps, "axes": []}
    return {"steps": steps, "axes": axes, "by": {x: series(steps, x, axes) for x in ["concurrency", *axes]}}


def across_runs(runs: list[tuple[str, bool, object, list[dict]]], x: str) -> list[dict]:
    """Compared runs' steps against any parameter `x`: each run's (label, disturbed, spec, steps).

    Where some run sweeps `x` (or `x` is the concurrency), each run keeps its own lines, one per
    setting of its other swept knobs. Where every run holds `x` fixed (runs of campaigns that
    differ in streams, or in file size), the runs' steps are lined up across runs instead, one
    line per concurrency (and per setting of what they sweep): throughput against streams over
    several campaigns, Tokyo's way. A step's value of a knob the run did not sweep is the run's.
    """

    def filled(spec, steps: list[dict], axes: list[str]) -> list[dict]:
        return [{**s, **{a: s.get(a, getattr(spec, a, None)) for a in {x, *axes} - {"concurrency"}}} for s in steps]

    within = x == "concurrency" or any(x in spec.swept_axes for _, _, spec, _ in runs)
    if within:
        lines = []
        for label, disturbed, spec, steps in runs:
            for line in series(filled(spec, steps, spec.swept_axes), x, [a for a in spec.swept_axes if a != x]):
                name = f"{label} · {line['label']}" if line["label"] else label
                lines.append({**line, "label": name, "disturbed": disturbed})
        return lines
    axes = sorted({a for _, _, spec, _ in runs for a in spec.swept_axes}, key=sweeps.AXES.index)
    rows = [row for _, _, spec, steps in runs for row in filled(spec, steps, axes)]
    return [{**line, "disturbed": False} for line in series(rows, x, axes)]

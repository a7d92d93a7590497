"""What the run page's charts read: the timeline, the error mix, a duration-vs-size sample,
the doors' host metrics and the events to draw on them (the steps and the choice between a
stored and a computed timeline are readers').

Every figure comes from aggregate SQL or from what was stored when the run ended (RunStep,
Run.summary, RunChart): a page of a million-transfer run never walks its rows in Python.
Times are epoch milliseconds, what Chart.js' time axis takes as it is.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta

from django.db import connection, transaction
from django.db.models import Count, Min

from campaigns.choices import TransferState
from campaigns.models import Run, RunChart, Transfer
from campaigns.results import analysis, disturbance
from campaigns.results.scope import run_scope, run_window
from campaigns.spec import RunSpec
from collectors.choices import DISTURBING_KINDS
from collectors.metric_series import host_series, labelled_series
from storageops.buckets import bucket_seconds

ROLLING_BUCKETS = 5
SCATTER_POINTS = 1500

# Each copy's bytes are spread evenly over its own duration, and its busy time over the
# buckets it overlaps: the busy seconds of a bucket over its width are the mean number of
# copies in flight. A failure counts in the bucket where it ended.
_TIMELINE_SQL = """
SELECT door, k,
       sum(CASE WHEN state = 'succeeded' THEN
             coalesce(b, 0) * CASE WHEN e - s > 1e-6
                                   THEN greatest(least(e, (k + 1) * %(w)s) - greatest(s, k * %(w)s), 0) / (e - s)
                                   ELSE 1 END
           ELSE 0 END) AS moved,
       sum(greatest(least(e, (k + 1) * %(w)s) - greatest(s, k * %(w)s), 0)) AS busy,
       sum(CASE WHEN state = 'failed' AND k = floor(e / %(w)s) THEN 1 ELSE 0 END) AS failures
FROM (
    SELECT {door} AS door, state, bytes_transferred AS b,
           extract(epoch FROM started_at)::float8 AS s, extract(epoch FROM finished_at)::float8 AS e
    FROM campaigns_transfer
    WHERE run_id = %(run)s AND state IN ('succeeded', 'failed')
      AND started_at IS NOT NULL AND finished_at IS NOT NULL
) t CROSS JOIN LATERAL generate_series(floor(s / %(w)s)::bigint, floor(e / %(w)s)::bigint) AS k
GROUP BY door, k
"""


def timeline_rows(run: Run, width: int) -> list[tuple[int, int, float, float, int]]:
    """(door endpoint id, bucket, bytes, busy seconds, failures) per door and bucket."""
    door = f"{RunSpec.of(run).door_side}_endpoint_id"
    if connection.vendor == "postgresql":
        with transaction.atomic(), connection.cursor() as cursor:
            # generate_series with row-dependent bounds is estimated at 1,000 rows a copy, so
            # the planner expects billions of rows and JIT-compiles the query: seconds spent
            # compiling for one pass over a few hundred thousand rows.
            cursor.execute("SET LOCAL jit = off")
            cursor.execute(_TIMELINE_SQL.format(door=door), {"run": run.pk, "w": float(width)})
            return [(d, int(k), float(m or 0), float(b or 0), int(f or 0)) for d, k, m, b, f in cursor.fetchall()]
    return timeline_rows_python(run, width)


def timeline_rows_python(run: Run, width: int) -> list[tuple[int, int, float, float, int]]:
    """The same figures row by row: for SQLite, and the reference the SQL is tested against."""
    acc: dict[tuple[int, int], list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    door_field = f"{RunSpec.of(run).door_side}_endpoint_id"
    rows = (
        Transfer.objects.filter(run=run, state__in=[TransferState.SUCCEEDED, TransferState.FAILED])
        .exclude(started_at=None)
        .exclude(finished_at=None)
        .values_list(door_field, "state", "bytes_transferred", "started_at", "finished_at")
    )
    for door, state, moved, started, finished in rows.iterator(chunk_size=20000):
        s, e = started.timestamp(), finished.timestamp()
        last = int(e // width)
        for k in range(int(s // width), last + 1):
            overlap = max(min(e, (k + 1) * width) - max(s, k * width), 0.0)
            cell = acc[(door, k)]
            if state == TransferState.SUCCEEDED:
                cell[0] += (moved or 0) * (overlap / (e - s) if e - s > 1e-6 else 1)
            cell[1] += overlap
            if state == TransferState.FAILED and k == last:
                cell[2] += 1
    return [(d, k, v[0], v[1], int(v[2])) for (d, k), v in acc.items()]


def compute_timeline(run: Run) -> dict:
    """Throughput per door and in total (with its rolling mean), copies in flight and
    failures, on one time axis of round buckets."""
    window = run_window(run)
    if window is None:
        return {"bucket_seconds": None, "times": [], "doors": {}, "total": [], "rolling": [], "active": []}
    width = bucket_seconds((window[1] - window[0]).total_seconds())
    rows = timeline_rows(run, width)
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
    """Failures per category, most frequent first (the partial index on failed rows serves it)."""
    rows = (
        Transfer.objects.filter(run=run, state=TransferState.FAILED)
        .values("error_category")
        .annotate(count=Count("pk"))
        .order_by("-count", "error_category")
    )
    return [{"category": r["error_category"] or "other", "count": r["count"]} for r in rows]


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

"""A run's transfers pre-aggregated by time: what charts, live tables and trimmed comparisons read.

One row per run, bucket width (1 s and 60 s), bucket, step, source and destination endpoint and
error category, written in the same statement (PostgreSQL) or transaction that records the
transfers, so a bucket never disagrees with the rows it sums. A page of a run with a million
copies then reads a few thousand buckets, never the rows, and the buckets outlive retention.

How a copy is spread: its bytes evenly over its own duration and its busy time over the buckets
it overlaps (a bucket's busy seconds over its width are the mean number of copies in flight);
its count, its failure and its duration go to the bucket where it ended. `first_start` and
`last_end` are the earliest start and the latest end of the copies in the bucket, clipped to
it, so the minimum over a run's buckets is exactly its first start.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime

from django.db import connection, models, transaction

from campaigns.models.records import Run, Transfer

WIDTHS = (1, 60)
# The states whose copies ran: a skipped transfer never started (its row has no start).
_RAN = ("succeeded", "failed", "cancelled")


class TransferBucket(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="buckets", db_index=False)
    width = models.PositiveSmallIntegerField(help_text="Seconds: 1 or 60.")
    k = models.BigIntegerField(help_text="The bucket: it begins at k × width seconds after the epoch.")
    step = models.IntegerField(help_text="The step index; -1 for none.")
    # Plain ids, not foreign keys: a bucket is written at thousands of copies a second, and
    # checking a key per write buys nothing (an endpoint in use cannot be deleted).
    source_endpoint_id = models.IntegerField()
    destination_endpoint_id = models.IntegerField()
    category = models.CharField(max_length=20, blank=True, help_text="The error category; '' for successes.")
    files_ok = models.IntegerField(default=0)
    files_failed = models.IntegerField(default=0)
    files_cancelled = models.IntegerField(default=0)
    moved = models.FloatField(default=0, help_text="Bytes of successful copies moved within the bucket.")
    busy = models.FloatField(default=0, help_text="Seconds of copies in flight within the bucket.")
    duration_sum = models.FloatField(default=0, help_text="Durations of the copies that ended in the bucket.")
    first_start = models.FloatField(help_text="Epoch seconds.")
    last_end = models.FloatField(help_text="Epoch seconds.")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["run", "width", "k", "step", "source_endpoint_id", "destination_endpoint_id", "category"],
                name="transferbucket_key",
            )
        ]

    def __str__(self) -> str:
        return f"run {self.run_id} [{self.k * self.width}+{self.width}s] step {self.step}"


_TABLE = TransferBucket._meta.db_table
_KEY = "run_id, width, k, step, source_endpoint_id, destination_endpoint_id, category"
_SUMS = ("files_ok", "files_failed", "files_cancelled", "moved", "busy", "duration_sum")


def source_columns(alias: str) -> str:
    """The columns insert_sql reads, as a RETURNING or SELECT list of table `alias`."""
    return ", ".join(f"{alias}.{name}" for name in _ROW_FIELDS)


def insert_sql(source: str) -> str:
    """The statement that adds the copies of relation `source` (columns as a transfer row's)
    to their buckets. `source` is SQL of ours (a CTE's name or a subquery), never user text."""
    overlap = "greatest(least(e, (k + 1) * w) - greatest(s, k * w), 0)"
    ended = "k = floor(e / w)"
    merge = ", ".join(f"{c} = b.{c} + EXCLUDED.{c}" for c in _SUMS)
    # Names and fragments of ours; every value is a parameter.
    return f"""
INSERT INTO {_TABLE} AS b ({_KEY}, {", ".join(_SUMS)}, first_start, last_end)
SELECT run_id, w, k, step, src, dst, category,
       count(*) FILTER (WHERE state = 'succeeded' AND {ended}),
       count(*) FILTER (WHERE state = 'failed' AND {ended}),
       count(*) FILTER (WHERE state = 'cancelled' AND {ended}),
       coalesce(sum(CASE WHEN state <> 'succeeded' THEN 0
                         WHEN e - s > 1e-6 THEN moved * {overlap} / (e - s)
                         WHEN {ended} THEN moved ELSE 0 END), 0),
       sum({overlap}),
       coalesce(sum(duration) FILTER (WHERE {ended} AND state <> 'cancelled'), 0),
       min(greatest(s, k * w)), max(least(e, (k + 1) * w))
FROM (
    SELECT run_id, coalesce(step, -1) AS step, source_endpoint_id AS src, destination_endpoint_id AS dst, state,
           CASE WHEN state = 'succeeded' THEN '' ELSE coalesce(error_category, '') END AS category,
           coalesce(bytes_transferred, 0)::float8 AS moved, duration,
           date_part('epoch', started_at) AS s, date_part('epoch', finished_at) AS e
    FROM {source} AS x
    WHERE state IN ('succeeded', 'failed', 'cancelled') AND started_at IS NOT NULL AND finished_at IS NOT NULL
    OFFSET 0
) r
CROSS JOIN (VALUES (1), (60)) AS ws(w)
CROSS JOIN LATERAL generate_series(floor(s / w)::bigint, floor(e / w)::bigint) AS k
GROUP BY run_id, w, k, step, src, dst, category
ON CONFLICT ({_KEY}) DO UPDATE SET {merge},
    first_start = least(b.first_start, EXCLUDED.first_start), last_end = greatest(b.last_end, EXCLUDED.last_end)
"""  # noqa: S608


# The columns insert_sql reads of its source (a record statement returns only these).
_ROW_FIELDS = (
    "run_id",
    "step",
    "source_endpoint_id",
    "destination_endpoint_id",
    "state",
    "error_category",
    "bytes_transferred",
    "duration",
    "started_at",
    "finished_at",
)


def contributions(rows: Iterable[Sequence]) -> dict[tuple, list[float]]:
    """What `insert_sql` adds, computed row by row (rows as `_ROW_FIELDS`): the reference the
    SQL is tested against."""
    acc: dict[tuple, list[float]] = defaultdict(lambda: [0, 0, 0, 0.0, 0.0, 0.0, float("inf"), float("-inf")])
    for run_id, step, src, dst, state, category, moved, duration, started, finished in rows:
        if state not in _RAN or started is None or finished is None:
            continue
        s, e = _epoch(started), _epoch(finished)
        category = "" if state == "succeeded" else (category or "")
        for w in WIDTHS:
            last = int(e // w)
            for k in range(int(s // w), last + 1):
                overlap = max(min(e, (k + 1) * w) - max(s, k * w), 0.0)
                cell = acc[(run_id, w, k, -1 if step is None else step, src, dst, category)]
                if k == last:
                    cell[("succeeded", "failed", "cancelled").index(state)] += 1
                    if state != "cancelled":
                        cell[5] += duration or 0.0
                if state == "succeeded":
                    cell[3] += (moved or 0) * (overlap / (e - s) if e - s > 1e-6 else (k == last))
                cell[4] += overlap
                cell[6] = min(cell[6], max(s, k * w))
                cell[7] = max(cell[7], min(e, (k + 1) * w))
    return acc


def _epoch(value: datetime | float) -> float:
    return value.timestamp() if isinstance(value, datetime) else float(value)


def add_transfers(ids: Sequence[int]) -> None:
    """Add the final copies among transfer `ids` to their buckets. Call it in the transaction
    that made them final, once per copy: a copy added twice is counted twice."""
    if not ids:
        return
    source = f"(SELECT * FROM {Transfer._meta.db_table} WHERE id = ANY(%s))"  # noqa: S608
    with connection.cursor() as cursor:
        cursor.execute(insert_sql(source), [list(ids)])


def rebuild(run_id: int) -> None:
    """The run's buckets computed afresh from its rows: for runs recorded before buckets were
    written with the records, and for benchmark data generated in bulk. The run's row is locked
    first, as every recording transaction locks it first, so no copy is added twice or missed."""
    with transaction.atomic():
        list(Run.objects.select_for_update().filter(pk=run_id).values_list("pk"))
        TransferBucket.objects.filter(run_id=run_id).delete()
        source = f"(SELECT * FROM {Transfer._meta.db_table} WHERE run_id = %s)"  # noqa: S608
        with connection.cursor() as cursor:
            # generate_series with row-dependent bounds is estimated at 1,000 rows a copy:
            # the planner would JIT-compile a query it expects to return billions of rows.
            cursor.execute("SET LOCAL jit = off")
            cursor.execute(insert_sql(source), [run_id])

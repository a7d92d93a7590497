"""Bulk database operations on a run's transfers, sized for hundreds of thousands of rows.

Only the driver holding a run's lease calls the claim/record functions, so they need no
row locks; every write that changes counters does it in the same transaction as the
transfer rows, so the run's counters can never disagree with its transfers.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from django.db import connection, transaction
from django.db.models import Count, F, Min, Q, Sum
from django.utils import timezone

from campaigns.choices import RETRYABLE_ERRORS, TransferState
from campaigns.models import Run, Transfer, buckets
from campaigns.runs.engines.copies import CopyJob, CopyResult
from campaigns.runs.planning import PlannedTransfer

_TABLE = Transfer._meta.db_table
# A batch's results go to the database as one JSON text, read back by json_to_recordset:
# binding them as fifteen arrays had psycopg quote every element in Python, which was a third
# of the driver's own CPU time at thousands of copies a second (benchmarks/bookkeeping_profile.py);
# json.dumps does it in C. Each row is written as the JSON object of these names.
_RESULT_COLUMNS = (
    ("state", "text"),
    ("started_at", "timestamptz"),
    ("finished_at", "timestamptz"),
    ("duration", "float8"),
    ("moved", "bigint"),
    ("throughput", "float8"),
    ("category", "text"),
    ("code", "integer"),
    ("message", "text"),
    ("src_sum", "text"),
    ("dst_sum", "text"),
    ("mode", "text"),
    ("host", "text"),
    ("id", "bigint"),
    ("executor", "text"),
)
_RESULT_NAMES = tuple(name for name, _ in _RESULT_COLUMNS)
# The table name is a constant of ours; every value is a bound parameter. The rows the
# statement made final are added to their time buckets by the same statement (buckets.insert_sql
# reads them as "upd").
_RECORD_UPDATE_PG = (
    "UPDATE " + _TABLE + " AS t SET state=v.state, started_at=v.started_at, finished_at=v.finished_at, "  # noqa: S608
    "duration=v.duration, bytes_transferred=v.moved, throughput_bps=v.throughput, error_category=v.category, "
    "error_code=v.code, error_message=v.message, source_checksum=v.src_sum, destination_checksum=v.dst_sum, "
    "copy_mode=v.mode, transfer_host=v.host FROM json_to_recordset(%s::json) AS v("
    + ", ".join(f"{name} {kind}" for name, kind in _RESULT_COLUMNS)
    + ") WHERE t.id = v.id AND t.executor = v.executor AND t.state || '' = 'active' RETURNING "
    # Only what the buckets read: RETURNING t.* copied every row's URLs, messages and history.
    + buckets.source_columns("t")
)
# `state || ''` (here and in _STARTED_SQL_PG) keeps the planner off the partial index on active
# rows, which it would otherwise pick for `state = 'active'`: between vacuums that index holds an
# entry for every row that was ever active, so a batch of 200 scanned 200,000 entries (21 ms)
# instead of making 200 primary-key lookups (7 ms with the buckets; benchmarks/bookkeeping_profile.py).
# `run_id + 0` in _STARTED_SQL_PG does the same for the indexes that lead with run_id: before any
# ANALYZE had seen a run planned a moment ago, the planner walked the run's 100,000 rows by one of
# them for every batch (7,000 rows/s instead of 46,000). The primary key is then the only way in,
# with statistics or without, so the driver needs no ANALYZE after a plan.
_RECORD_SQL_PG = f"WITH upd AS ({_RECORD_UPDATE_PG}) {buckets.insert_sql('upd')}"
# Claim the next queued rows in plan order and mark them active in one round trip; a failed
# attempt waiting for its retry is not due before its retry_at.
_CLAIM_SQL = (
    "UPDATE " + _TABLE + " SET state='active', attempt=attempt+1, step=%s, executor=%s, retry_at=NULL, "  # noqa: S608
    "started_at=NULL "
    "WHERE id IN (SELECT id FROM " + _TABLE + " WHERE run_id=%s AND state='queued' "
    "AND (retry_at IS NULL OR retry_at <= now()) ORDER BY index LIMIT %s) "
    "RETURNING id, index, source, destination, size, attempt, source_checksum"
)
_RETRY_SQL_PG = (
    "UPDATE " + _TABLE + " SET retry_at=%s, history = history || %s::jsonb "  # noqa: S608
    "WHERE id=%s AND executor=%s AND state='queued'"
)
# A copy under way gets its start time as soon as the driver sees it start, so the live page
# and the API show what is in flight and since when; its result later writes the same value.
_STARTED_SQL_PG = (
    "UPDATE " + _TABLE + " AS t SET started_at=v.started_at FROM json_to_recordset(%s::json) "  # noqa: S608
    "AS v(id bigint, started_at timestamptz) WHERE t.id=v.id AND t.run_id + 0 = %s AND t.executor=%s "
    "AND t.state || '' = 'active' AND t.started_at IS NULL"
)
# Rows a dead driver left active: those it had seen copying keep that lost attempt in their history.
_ORPHANS_SQL_PG = (
    "UPDATE " + _TABLE + " SET state='queued', started_at=NULL, history = CASE WHEN started_at IS NULL "  # noqa: S608
    "THEN history ELSE history || jsonb_build_array(jsonb_build_object('attempt', attempt, 'started_at', "
    "started_at, 'category', 'driver_lost', 'message', %s)) END WHERE run_id=%s AND state='active'"
)
_ORPHAN_MESSAGE = "the driver running this copy died before it ended; the copy is tried again"
# Each attempt waits retry_delay x 2^(attempt-1), at most this long.
MAX_RETRY_DELAY = 3600


def insert_plan(run_id: int, planned: Iterable[PlannedTransfer], checksums: dict[int, str] | None = None) -> int:
    """Insert the planned transfers (state queued). COPY on PostgreSQL: 100k rows in ~1 s.

    `checksums` maps a file size to the known checksum of the source data of that size
    (sources StorageOps generated); it is kept as the transfer's expected source checksum.
    """
    return _copy_plan(run_id, planned, checksums or {})


def _copy_plan(run_id: int, planned: Iterable[PlannedTransfer], checksums: dict[int, str]) -> int:
    columns = (
        "run_id, index, source, destination, size, source_endpoint_id, destination_endpoint_id, state, "
        "attempt, executor, error_category, error_message, source_checksum, destination_checksum, copy_mode, history"
    )
    count = 0
    with connection.cursor() as cursor:
        raw = cursor.cursor  # the psycopg cursor, for COPY
        with raw.copy(f"COPY {_TABLE} ({columns}) FROM STDIN") as copy:
            for item in planned:
                copy.write_row(
                    (
                        run_id,
                        item.index,
                        item.source,
                        item.destination,
                        item.size,
                        item.source_endpoint_id,
                        item.destination_endpoint_id,
                        TransferState.QUEUED,
                        0,
                        "",
                        "",
                        "",
                        item.checksum or checksums.get(item.size, ""),
                        "",
                        "",
                        "[]",
                    )
                )
                count += 1
    return count


def claim(run_id: int, limit: int, step: int, executor: str) -> list[CopyJob]:
    """Mark up to `limit` queued transfers active for this executor and return them in order."""
    if limit <= 0:
        return []
    with connection.cursor() as cursor:
        cursor.execute(_CLAIM_SQL, [step, executor, run_id, limit])
        rows = sorted(cursor.fetchall(), key=lambda r: r[1])
    return [
        CopyJob(id=r[0], index=r[1], source=r[2], destination=r[3], size=r[4], step=step, attempt=r[5], checksum=r[6])
        for r in rows
    ]


def _ts(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, tz=UTC)


def _json(rows: list[dict]) -> str:
    # A NaN would be invalid JSON: refused here, not by the server with the batch half-read.
    return json.dumps(rows, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def record(
    run_id: int, results: Sequence[CopyResult], retries: int, *, executor: str, retry_delay: float = 0
) -> dict[str, int]:
    """Write finished attempts and bump the run's counters in one transaction.

    A failed attempt with retries left goes back to the queue (its error kept for the
    record) instead of becoming final. Only rows this executor still holds active are
    written, so a driver that lost its lease cannot overwrite its successor's work.
    Returns the counter deltas.
    """
    done = failed = cancelled = moved = requeued = 0
    rows, retrying = [], []
    for r in results:
        retry = not r.ok and r.category in RETRYABLE_ERRORS and r.job.attempt <= retries
        if r.ok:
            state = TransferState.SUCCEEDED
            done += 1
            moved += r.bytes
        elif retry:
            state = TransferState.QUEUED
            requeued += 1
            wait = min(retry_delay * 2 ** (r.job.attempt - 1), MAX_RETRY_DELAY)
            retrying.append((_ts(r.finished + wait), _attempt(r), r.job.id))
        elif r.category == "cancelled":
            # A copy is handed its result only after it started: cancelled, never "skipped".
            state = TransferState.CANCELLED
            cancelled += 1
        else:
            state = TransferState.FAILED
            failed += 1
        throughput = (r.bytes / r.duration) if r.ok and r.duration > 0 else None
        rows.append(
            (
                state,
                # ISO text of the microsecond datetime: what binding the datetime wrote.
                _ts(r.started).isoformat(),
                _ts(r.finished).isoformat(),
                r.duration,
                r.bytes if r.ok else 0,
                throughput,
                r.category,
                r.code,
                # A server's text may hold a NUL, which no PostgreSQL text can.
                r.message[:4000].replace("\x00", ""),
                r.source_checksum,
                r.destination_checksum,
                r.copy_mode,
                r.host,
                r.job.id,
                executor,
            )
        )
    with transaction.atomic():
        # The run's row first, as buckets.rebuild locks it first: a rebuild and a record wait
        # for each other instead of each holding what the other needs.
        if done or failed or cancelled:
            Run.objects.filter(pk=run_id).update(
                files_done=F("files_done") + done,
                files_failed=F("files_failed") + failed,
                files_cancelled=F("files_cancelled") + cancelled,
                bytes_done=F("bytes_done") + moved,
            )
        with connection.cursor() as cursor:
            cursor.execute(_RECORD_SQL_PG, [_json([dict(zip(_RESULT_NAMES, row, strict=True)) for row in rows])])
        if retrying:
            _keep_attempts(retrying, executor)
    return {"done": done, "failed": failed, "cancelled": cancelled, "bytes": moved, "requeued": requeued}


def _attempt(r: CopyResult) -> dict:
    """One earlier attempt of a transfer, as its history keeps it."""
    return {
        "attempt": r.job.attempt,
        "started_at": _ts(r.started).isoformat(),
        "finished_at": _ts(r.finished).isoformat(),
        "duration": round(r.duration, 3),
        "category": r.category,
        "code": r.code,
        "message": r.message[:1000],
    }


def _keep_attempts(retrying: list[tuple[datetime, dict, int]], executor: str) -> None:
    """Requeued rows: when their retry is due, and the attempt that failed added to their history.
    Retries are rare next to copies, so this is a statement a retry, not a batch."""
    with connection.cursor() as cursor:
        cursor.executemany(_RETRY_SQL_PG, [(at, json.dumps([entry]), pk, executor) for at, entry, pk in retrying])


def next_retry_at(run_id: int) -> datetime | None:
    """When the earliest transfer waiting for its retry is due (None: none is waiting)."""
    waiting = Transfer.objects.filter(run_id=run_id, state=TransferState.QUEUED, retry_at__isnull=False)
    return waiting.aggregate(due=Min("retry_at"))["due"]


def release(run_id: int, ids: list[int], executor: str) -> int:
    """Return claimed transfers that no copy thread started: not an attempt, just not yet."""
    return Transfer.objects.filter(run_id=run_id, id__in=ids, executor=executor, state=TransferState.ACTIVE).update(
        state=TransferState.QUEUED, attempt=F("attempt") - 1, executor="", step=None, started_at=None
    )


def mark_started(run_id: int, executor: str, started: Sequence[tuple[int, float]]) -> int:
    """Give copies under way their start time (epoch seconds), once; returns the rows marked."""
    if not started:
        return 0
    with connection.cursor() as cursor:
        rows = [{"id": pk, "started_at": _ts(at).isoformat()} for pk, at in started]
        cursor.execute(_STARTED_SQL_PG, [_json(rows), run_id, executor])
        return cursor.rowcount


def note_lost_copies(
    run_id: int, executor: str, lost: Sequence[tuple[int, float | None]], message: str, category: str = "client_lost"
) -> int:
    """Copies a lost client had under way (or whose result the broker lost): each row keeps the
    lost copy in its history (its start where the client had said it, None where not) and loses
    its start time, since the copy starts again within the same attempt. Rare: a statement each."""
    noted = 0
    with transaction.atomic():
        for pk, started in lost:
            rows = Transfer.objects.filter(pk=pk, run_id=run_id, executor=executor, state=TransferState.ACTIVE)
            for row in rows.only("attempt", "history"):
                began = _ts(started).isoformat() if started is not None else None
                entry = {"attempt": row.attempt, "started_at": began, "category": category}
                noted += rows.update(history=[*row.history, {**entry, "message": message}], started_at=None)
    return noted


def requeue_orphans(run_id: int) -> int:
    """Transfers left active by a driver that died go back to the queue to be retried."""
    with connection.cursor() as cursor:
        cursor.execute(_ORPHANS_SQL_PG, [_ORPHAN_MESSAGE, run_id])
        return cursor.rowcount


def untried_count(run_id: int) -> int:
    """Transfers still queued with no attempt made: no copy of them ever started."""
    return Transfer.objects.filter(run_id=run_id, state=TransferState.QUEUED, attempt=0).count()


def close_remaining(run_id: int, reason: str, *, not_needed: str = "") -> int:
    """Give every transfer not yet final its one final state: a copy under way (it has a start
    time) was stopped by the run's end, so it is cancelled, with the time it ran as its duration,
    and joins its buckets; one that never started is skipped, whatever ended the run. With
    `not_needed` (a completed sweep of time-bounded steps), those never tried say so instead of
    the run's stop reason: no step needed them."""
    now = timezone.now()
    with transaction.atomic():
        remaining = Transfer.objects.filter(run_id=run_id, state__in=[TransferState.QUEUED, TransferState.ACTIVE])
        # At most a step's copies: a row each is cheap, and each gets its own duration.
        stopped = list(remaining.filter(started_at__isnull=False).only("id", "started_at"))
        for row in stopped:
            row.state, row.error_category, row.error_message = TransferState.CANCELLED, "cancelled", reason
            row.finished_at, row.duration = now, max((now - row.started_at).total_seconds(), 0.0)
        cancelled = Transfer.objects.bulk_update(
            stopped, ["state", "error_category", "error_message", "finished_at", "duration"]
        )
        under_way = [row.pk for row in stopped]
        unstarted = remaining.filter(started_at__isnull=True)
        skipped = _skip(unstarted.filter(state=TransferState.QUEUED, attempt=0), not_needed, now) if not_needed else 0
        skipped += _skip(unstarted, reason, now)
        Run.objects.filter(pk=run_id).update(
            files_skipped=F("files_skipped") + skipped, files_cancelled=F("files_cancelled") + cancelled
        )
        buckets.add_transfers(under_way)
    return cancelled + skipped


def _skip(rows, message: str, now) -> int:
    return rows.update(
        state=TransferState.SKIPPED, error_category="", error_message=message, finished_at=now, duration=None
    )


def source_checksums(run_id: int) -> dict[int, str] | None:
    """The expected checksum of the source data of each size, as `run_id`'s plan recorded it;
    None when that run never wrote its plan (its sources may never have been created)."""
    rows = Transfer.objects.filter(run_id=run_id)
    if not rows.exists():
        return None
    pairs = rows.exclude(source_checksum="").values_list("size", "source_checksum").order_by().distinct()
    return dict(pairs)


def recount(run_id: int) -> dict[str, int]:
    """Counters recomputed from the rows: the truth a resumed driver starts from."""
    agg = Transfer.objects.filter(run_id=run_id).aggregate(
        done=Count("id", filter=Q(state=TransferState.SUCCEEDED)),
        failed=Count("id", filter=Q(state=TransferState.FAILED)),
        skipped=Count("id", filter=Q(state=TransferState.SKIPPED)),
        cancelled=Count("id", filter=Q(state=TransferState.CANCELLED)),
        moved=Sum("bytes_transferred", filter=Q(state=TransferState.SUCCEEDED)),
    )
    return {
        "files_done": agg["done"],
        "files_failed": agg["failed"],
        "files_skipped": agg["skipped"],
        "files_cancelled": agg["cancelled"],
        "bytes_done": agg["moved"] or 0,
    }


def error_counts(run_id: int) -> dict[str, int]:
    """The run's failed copies per error category, the most common first (a failed run's stop reason)."""
    rows = (
        Transfer.objects.filter(run_id=run_id, state=TransferState.FAILED)
        .values_list("error_category")
        .annotate(n=Count("id"))
        .order_by("-n", "error_category")
    )
    return {category or "other": n for category, n in rows}

"""Database side of the FTS engine: which rows a job holds, and each file's final record.

FTS retries files itself (the job's explicit `retry`), so a file it reports final is final
here too: no requeue. Writes are guarded by the executor like transfer_store's, and the
run's counters move in the same transaction as the rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from django.db import transaction
from django.db.models import F, Value
from django.db.models.functions import Greatest

from campaigns.choices import TransferState
from campaigns.models import Run, RunStep, Transfer, buckets
from campaigns.runs.engines.fts.client import FileOutcome

# A file FTS reports CANCELED that is whole on its destination all the same (landed.py).
COMPLETE_NOTE = " (complete on destination: FTS's cancel reached the copy after it had ended)"
_STATE = {"FINISHED": TransferState.SUCCEEDED, "FAILED": TransferState.FAILED, "CANCELED": TransferState.CANCELLED}


def mark_submitted(run_id: int, transfer_ids: Sequence[int], job_id: str, executor: str) -> int:
    return Transfer.objects.filter(
        run_id=run_id, id__in=transfer_ids, executor=executor, state=TransferState.ACTIVE
    ).update(fts_job_id=job_id)


def submitted_jobs(run_id: int) -> list[str]:
    """FTS jobs that still hold transfers of the run (what a resumed driver polls)."""
    return sorted(
        Transfer.objects.filter(run_id=run_id, state=TransferState.ACTIVE)
        .exclude(fts_job_id="")
        .values_list("fts_job_id", flat=True)
        .distinct()
    )


def adopt(run_id: int, executor: str) -> tuple[int, int]:
    """On resume: rows an FTS job holds stay with it (now ours); rows never submitted are requeued."""
    with transaction.atomic():
        kept = (
            Transfer.objects.filter(run_id=run_id, state=TransferState.ACTIVE)
            .exclude(fts_job_id="")
            .update(executor=executor)
        )
        requeued = Transfer.objects.filter(run_id=run_id, state=TransferState.ACTIVE, fts_job_id="").update(
            state=TransferState.QUEUED, attempt=F("attempt") - 1, executor="", step=None
        )
    return kept, requeued


def cancelled_copies(run_id: int, outcomes: Sequence[FileOutcome]) -> list[tuple[int, str, int, str, str]]:
    """(transfer id, destination, planned size, known checksum, source) of the files FTS reports
    CANCELED after it had started them: their destination may hold the whole file (landed.py)."""
    ids = [o.transfer_id for o in outcomes if o.state == "CANCELED" and o.start_time and o.transfer_id is not None]
    if not ids:
        return []
    fields = ("id", "destination", "size", "source_checksum", "source")
    return list(Transfer.objects.filter(run_id=run_id, id__in=ids).values_list(*fields))


def record_files(
    run_id: int,
    outcomes: Sequence[FileOutcome],
    job_id: str,
    executor: str,
    complete: dict[int, bool | None] | None = None,
) -> dict[str, int]:
    """Write FTS's final state of each file into its transfer; returns the counter deltas.

    A file FTS cancelled before it started is skipped (never started); one it had started is
    cancelled, with its duration from FTS's start and finish times (FTS reports 0 for it) and,
    from `complete` (transfer id -> found whole on the destination), whether it got there anyway."""
    complete = complete or {}
    by_id = {o.transfer_id: o for o in outcomes if o.transfer_id is not None}
    done = failed = skipped = cancelled = moved = planned = 0
    with transaction.atomic():
        rows = list(
            Transfer.objects.filter(
                run_id=run_id, id__in=list(by_id), executor=executor, state=TransferState.ACTIVE, fts_job_id=job_id
            )
        )
        for row in rows:
            o = by_id[row.pk]
            planned += row.size
            row.state = _STATE[o.state]
            row.started_at = o.start_time
            row.finished_at = o.finish_time
            row.duration = o.tx_duration
            row.bytes_transferred = o.filesize if o.ok else 0
            row.throughput_bps = o.throughput_bps
            row.error_category = o.category
            row.error_code = o.code
            row.error_message = o.reason[:4000]
            if o.state == "CANCELED":
                row.duration = cancelled_duration(o)
                if o.start_time is None:
                    row.state, row.error_category = TransferState.SKIPPED, ""  # never started
                else:
                    row.complete_on_destination = complete.get(row.pk)
                    if row.complete_on_destination:
                        row.error_message = (o.reason + COMPLETE_NOTE)[:4000]
            row.transfer_host = o.transfer_host[:255]
            row.fts_file_id = o.file_id
            row.copy_mode = "fts"
            if o.ok and ":" in o.checksum:
                # FTS verified the file against the value we gave it.
                row.destination_checksum = o.checksum.split(":", 1)[1]
            if o.ok:
                done += 1
                moved += o.filesize
            elif row.state == TransferState.CANCELLED:
                cancelled += 1
            elif row.state == TransferState.SKIPPED:
                skipped += 1
            else:
                failed += 1
        Transfer.objects.bulk_update(
            rows,
            [
                "state",
                "started_at",
                "finished_at",
                "duration",
                "bytes_transferred",
                "throughput_bps",
                "error_category",
                "error_code",
                "error_message",
                "transfer_host",
                "fts_file_id",
                "copy_mode",
                "destination_checksum",
                "complete_on_destination",
            ],
        )
        if rows:
            Run.objects.filter(pk=run_id).update(
                files_done=F("files_done") + done,
                files_failed=F("files_failed") + failed,
                files_skipped=F("files_skipped") + skipped,
                files_cancelled=F("files_cancelled") + cancelled,
                bytes_done=F("bytes_done") + moved,
            )
            # After the run's row is locked, as buckets.rebuild locks it first.
            buckets.add_transfers([row.pk for row in rows])
    return {
        "done": done,
        "failed": failed,
        "skipped": skipped,
        "cancelled": cancelled,
        "bytes": moved,
        "written": len(rows),
        "planned_bytes": planned,
    }


def cancelled_duration(outcome: FileOutcome) -> float | None:
    """How long a cancelled file ran: FTS's tx_duration where it says more than 0 (it says 0 for
    a copy its cancel stopped, however long it ran), else its finish less its start; None for a
    file never started, or with no finish time."""
    if outcome.start_time is None:
        return None
    if outcome.tx_duration:
        return outcome.tx_duration
    if outcome.finish_time is None:
        return None
    return max((outcome.finish_time - outcome.start_time).total_seconds(), 0.0)


def mark_measured(run_id: int, step: int, at: float) -> int:
    """The step ran at its concurrency from `at` (epoch seconds, FTS's clock): RunStep.measured_from.

    Never before the step's own start: FTS gives its times in whole seconds, so a copy that began
    with the step can read up to a second earlier than the step (PostgreSQL's GREATEST skips a
    NULL start)."""
    when = datetime.fromtimestamp(at, UTC)
    rows = RunStep.objects.filter(run_id=run_id, index=step, measured_from__isnull=True)
    return rows.update(measured_from=Greatest(Value(when), F("started_at")))

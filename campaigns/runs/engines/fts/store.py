"""Database side of the FTS engine: which rows a job holds, and each file's final record.

FTS retries files itself (the job's explicit `retry`), so a file it reports final is final
here too: no requeue. Writes are guarded by the executor like transfer_store's, and the
run's counters move in the same transaction as the rows.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import transaction
from django.db.models import F

from campaigns.choices import TransferState
from campaigns.models import Run, Transfer, buckets
from campaigns.runs.engines.fts.client import FileOutcome

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


def record_files(run_id: int, outcomes: Sequence[FileOutcome], job_id: str, executor: str) -> dict[str, int]:
    """Write FTS's final state of each file into its transfer; returns the counter deltas."""
    by_id = {o.transfer_id: o for o in outcomes if o.transfer_id is not None}
    done = failed = skipped = moved = planned = 0
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
            ],
        )
        if rows:
            Run.objects.filter(pk=run_id).update(
                files_done=F("files_done") + done,
                files_failed=F("files_failed") + failed,
                files_skipped=F("files_skipped") + skipped,
                bytes_done=F("bytes_done") + moved,
            )
            # After the run's row is locked, as buckets.rebuild locks it first.
            buckets.add_transfers([row.pk for row in rows])
    return {
        "done": done,
        "failed": failed,
        "skipped": skipped,
        "bytes": moved,
        "written": len(rows),
        "planned_bytes": planned,
    }

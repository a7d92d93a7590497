"""Database side of the FTS engine: which rows a job holds, and each file's final record.

What FTS calls a transfer (its job, its file id) is in FtsTransfer, one row per transfer handed
to FTS, written in batches beside the transfers' own rows.

FTS retries files itself (the job's explicit `retry`), so a file it reports final is final
here too: no requeue. Writes are guarded by the executor like transfer_store's, and the
run's counters move in the same transaction as the rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta

from django.db import transaction
from django.db.models import F, QuerySet, Value
from django.db.models.functions import Coalesce, Greatest

from campaigns.choices import TransferState
from campaigns.models import Run, RunStep, Transfer, buckets
from campaigns.runs.engines.fts.client import FileOutcome
from campaigns.runs.engines.fts.landed import Found
from campaigns.runs.engines.fts.models import FtsTransfer

_STATE = {"FINISHED": TransferState.SUCCEEDED, "FAILED": TransferState.FAILED, "CANCELED": TransferState.CANCELLED}


def mark_submitted(run_id: int, transfer_ids: Sequence[int], job_id: str, executor: str) -> int:
    """The job FTS gave these transfers, on those still ours and active; how many it holds.

    The rows are locked while it is written, so that a driver taking the run over (which moves
    them to itself) waits for it or finds it done, as it did when this was one UPDATE."""
    with transaction.atomic():
        held = list(
            Transfer.objects.select_for_update()
            .filter(run_id=run_id, id__in=transfer_ids, executor=executor, state=TransferState.ACTIVE)
            .values_list("id", flat=True)
        )
        _write((FtsTransfer(transfer_id=pk, job_id=job_id) for pk in held), ["job_id"])
    return len(held)


def _write(rows: Iterable[FtsTransfer], fields: list[str]) -> None:
    """One INSERT ... ON CONFLICT for a batch: a transfer's row is made by its first write and
    updated by the next (its file id when FTS reports it final)."""
    FtsTransfer.objects.bulk_create(
        list(rows), update_conflicts=True, unique_fields=["transfer"], update_fields=fields, batch_size=1000
    )


def _in_a_job(run_id: int):
    """The run's transfers an FTS job holds (a job id recorded)."""
    return Transfer.objects.filter(run_id=run_id, fts__job_id__gt="")


def submitted_jobs(run_id: int) -> list[str]:
    """FTS jobs that still hold transfers of the run (what a resumed driver polls)."""
    return sorted(_in_a_job(run_id).filter(state=TransferState.ACTIVE).values_list("fts__job_id", flat=True).distinct())


def run_jobs(run_id: int) -> list[str]:
    """Every FTS job the run's transfers were submitted in (the run's FTS extras)."""
    return sorted(_in_a_job(run_id).values_list("fts__job_id", flat=True).distinct())


def job_rows(run_id: int, job_id: str):
    """The run's transfers a job still holds (active)."""
    return Transfer.objects.filter(run_id=run_id, fts__job_id=job_id, state=TransferState.ACTIVE)


def with_ids(transfers: QuerySet[Transfer]) -> QuerySet[Transfer]:
    """Transfers with FTS's ids beside them, as they read when they were Transfer's columns:
    fts_job_id ("" for a transfer never submitted) and fts_file_id (None until FTS reports the
    file), annotations a query may filter on too (for checks of a run against FTS's own record)."""
    return transfers.annotate(fts_job_id=Coalesce("fts__job_id", Value("")), fts_file_id=F("fts__file_id"))


def adopt(run_id: int, executor: str) -> tuple[int, int]:
    """On resume: rows an FTS job holds stay with it (now ours); rows never submitted are requeued."""
    with transaction.atomic():
        kept = _in_a_job(run_id).filter(state=TransferState.ACTIVE).update(executor=executor)
        requeued = (
            Transfer.objects.filter(run_id=run_id, state=TransferState.ACTIVE)
            .exclude(fts__job_id__gt="")
            .update(state=TransferState.QUEUED, attempt=F("attempt") - 1, executor="", step=None)
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
    complete: Mapping[int, Found | bool | None] | None = None,
    cancel_sent: datetime | None = None,
    algorithm: str = "adler32",
) -> dict[str, int]:
    """Write FTS's final state of each file into its transfer; returns the counter deltas.

    A file FTS cancelled before it started is skipped (never started). One it had started is
    cancelled, with its duration from FTS's start and finish times (FTS reports 0 for it), unless
    `complete` (transfer id -> what its destination holds, landed.Found) says it is whole there:
    FTS's cancel kills copies only seconds after it marks them CANCELED, and one that ended in
    between is a finished copy, recorded as succeeded with its bytes, checksum and the time it
    really ran, FTS's own CANCELED kept in its note. `cancel_sent`: when StorageOps sent the
    cancel, which each note puts in its place among the copy's own times."""
    complete = complete or {}
    by_id = {o.transfer_id: o for o in outcomes if o.transfer_id is not None}
    done = failed = skipped = cancelled = moved = planned = 0
    with transaction.atomic():
        rows = list(
            Transfer.objects.filter(
                run_id=run_id, id__in=list(by_id), executor=executor, state=TransferState.ACTIVE, fts__job_id=job_id
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
                if o.start_time is None:
                    row.state, row.error_category = TransferState.SKIPPED, ""  # never started
                else:
                    found = _found(complete.get(row.pk))
                    row.complete_on_destination = found.whole
                    if found.whole:
                        _landed(row, o, found, cancel_sent, algorithm)
                    else:
                        row.duration = cancelled_duration(o)
                        row.error_message = cancelled_note(o, found, cancel_sent)[:4000]
            row.transfer_host = o.transfer_host[:255]
            row.copy_mode = "fts"
            if o.ok and ":" in o.checksum:
                # FTS verified the file against the value we gave it.
                row.destination_checksum = o.checksum.split(":", 1)[1]
            if row.state == TransferState.SUCCEEDED:
                done += 1
                moved += row.bytes_transferred or 0
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
                "copy_mode",
                "destination_checksum",
                "complete_on_destination",
            ],
        )
        _write((FtsTransfer(transfer_id=row.pk, job_id=job_id, file_id=by_id[row.pk].file_id) for row in rows),
               ["file_id"])  # fmt: skip
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


def _found(value: Found | bool | None) -> Found:
    return value if isinstance(value, Found) else Found(value)


def _landed(row: Transfer, o: FileOutcome, found: Found, cancel_sent: datetime | None, algorithm: str) -> None:
    """A copy FTS reported CANCELED that is whole on its destination: a finished copy."""
    end, how = copy_end(o, found)
    duration = max((end - o.start_time).total_seconds(), 0.0)
    row.state = TransferState.SUCCEEDED
    row.finished_at, row.duration = end, duration
    row.bytes_transferred = row.size
    row.throughput_bps = row.size / duration if duration > 0 else None
    row.destination_checksum = found.checksum
    row.error_category, row.error_code = "", None
    row.error_message = landed_note(o, found, end, how, cancel_sent, algorithm)[:4000]


def copy_end(o: FileOutcome, found: Found) -> tuple[datetime, str]:
    """When a copy FTS cancelled, found whole on its destination, had ended at the latest, and
    what says so: FTS's tx_duration where it gives one above 0; else the earlier of the check
    that first found the file whole and FTS's finish time (its kill, seconds after the copy).
    FTS's start and finish are to the second; the check's time is StorageOps's clock."""
    start = o.start_time
    whole_at = _at(found.checked_at)
    if o.tx_duration:
        return start + timedelta(seconds=o.tx_duration), "FTS's transfer duration"
    if whole_at is not None and (o.finish_time is None or whole_at < o.finish_time):
        return max(whole_at, start), "found so then"
    if o.finish_time is not None:
        return o.finish_time, "FTS's finish time; found so only after it"
    return start, "no later time known"


def landed_note(
    o: FileOutcome, found: Found, end: datetime, how: str, cancel_sent: datetime | None, algorithm: str
) -> str:
    """The note of a copy FTS recorded CANCELED that is whole on its destination: FTS's word,
    the check, then the cancel and the copy's end in the order they came."""
    checksum = f"{algorithm} {found.checksum}" if found.checksum else algorithm
    parts = [f"FTS recorded it CANCELED ({o.reason or 'no reason given'}); complete on the destination, "
             f"checksum match ({checksum})."]  # fmt: skip
    ran = max((end - o.start_time).total_seconds(), 0.0)
    if how == "FTS's transfer duration":
        parts.append(
            f"The copy ended at {_clock(end)} ({how})"
            + (f", {_order(end, cancel_sent)} the cancel was sent at {_clock(cancel_sent)}." if cancel_sent else ".")
        )
        parts.append(f"It ran {_secs(ran)} from {_clock(o.start_time)}.")
    else:
        # FTS reports CANCELED a copy whose end it had not seen when the cancel came.
        whole = f"its file was whole on the destination by {_clock(end)} ({how})"
        if cancel_sent is not None:
            parts.append(f"The cancel was sent at {_clock(cancel_sent)}, before the copy had ended (FTS would have "
                         f"recorded it FINISHED), and {whole}.")  # fmt: skip
        else:
            parts.append(f"{whole[0].upper()}{whole[1:]}.")
        parts.append(f"It landed in at most {_secs(ran)} from its start at {_clock(o.start_time)}.")
    if o.finish_time is not None:
        parts.append(f"FTS's finish time, {_clock(o.finish_time)}, is when it stopped the copy's process.")
    return " ".join(parts)


def cancelled_note(o: FileOutcome, found: Found, cancel_sent: datetime | None) -> str:
    """The note of a copy FTS stopped: its reason, then the cancel and the copy's own times in
    the order they came, and what its destination holds."""
    parts = [o.reason.rstrip(".") + "." if o.reason else "Cancelled."]
    ran = cancelled_duration(o)
    if cancel_sent is not None and o.start_time is not None:
        if cancel_sent >= o.start_time:
            parts.append(f"The cancel was sent at {_clock(cancel_sent)}, "
                         f"{_secs((cancel_sent - o.start_time).total_seconds())} after the copy started at "
                         f"{_clock(o.start_time)}.")  # fmt: skip
        else:
            parts.append(f"The copy started at {_clock(o.start_time)}, after the cancel was sent at "
                         f"{_clock(cancel_sent)}.")  # fmt: skip
    if o.finish_time is not None and ran is not None:
        parts.append(f"FTS stopped it at {_clock(o.finish_time)}: it ran {_secs(ran)}.")
    if found.whole is False:
        parts.append("Not whole on the destination.")
    elif found.whole is None:
        parts.append("Whether it is whole on the destination could not be checked.")
    return " ".join(parts)


def _order(end: datetime, cancel_sent: datetime) -> str:
    return "after" if end >= cancel_sent else "before"


def _at(epoch: float | None) -> datetime | None:
    return None if epoch is None else datetime.fromtimestamp(epoch, UTC)


def _clock(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%H:%M:%S UTC")


def _secs(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"


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

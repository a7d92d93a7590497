"""Retry failed: re-drive, as a new run linked to it, the transfers of a finished run that did
not succeed (failed, timed out, skipped by a budget or a stop, cancelled), so a campaign run
for weeks ends with nothing lost. Left out: a file found whole on its destination however it
was recorded (a copy FTS reported CANCELED that had ended before its kill), and a file a
completed time-bounded sweep never needed (skipped "not needed": no shortfall to make good).

The new run freezes nothing anew: its snapshot is the old run's (the same parameters and
endpoints) with `"retry": {"of", "indices", "seed"}`, and planning plans exactly those indices,
each with its source and size, below the new run's own folder. Its byte budget is the one any
new run of the campaign gets now (starting.new_run). A chain of retries stays a line: a run
is retried once, and what its retry left is retried from the retry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.core.exceptions import ValidationError
from django.db import transaction

from campaigns.choices import FINAL_RUN_STATES, TransferState
from campaigns.models import Run, Transfer
from campaigns.results.readers import NOT_NEEDED
from campaigns.runs.outcome import NOT_NEEDED_REASON
from campaigns.runs.planning import planned_indices
from campaigns.runs.starting import dispatch, new_run
from campaigns.spec import RunSpec
from collectors.events import log_event

if TYPE_CHECKING:
    from campaigns.runs.starting import AnyUser


def retry_indices(run: Run) -> list[int]:
    """The indices of `run`'s planned transfers that did not succeed, in order, less those
    whole on their destination and those a completed sweep never needed. A run that never wrote
    its plan (cancelled before its start, failed while preparing) did not succeed at any of them."""
    rows = Transfer.objects.filter(run=run)
    if not rows.exists():
        return planned_indices(run.snapshot)
    rows = rows.exclude(state=TransferState.SUCCEEDED).exclude(complete_on_destination=True)
    rows = rows.exclude(state=TransferState.SKIPPED, error_message=NOT_NEEDED_REASON)
    return list(rows.order_by("index").values_list("index", flat=True))


def not_needed(run: Run) -> int:
    """How many of the run's files a completed time-bounded sweep never needed (the summary's
    count; a list of runs reads it from an annotation of the same name, its summary deferred)."""
    if "summary" in run.get_deferred_fields():
        value = getattr(run, "not_needed", None)
    else:
        value = (run.summary or {}).get(NOT_NEEDED)
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _landed_unsucceeded(run: Run) -> int:
    """Files recorded as not succeeded that are whole on their destination. Only a cancelled
    copy is checked there, so a run with none is not read."""
    if not run.files_cancelled:
        return 0
    rows = Transfer.objects.filter(run=run, complete_on_destination=True)
    return rows.exclude(state=TransferState.SUCCEEDED).count()


def _left(run: Run) -> int:
    """How many transfers retry_indices gives for `run`, from its counters."""
    return max(run.planned_files - run.files_done - not_needed(run) - _landed_unsucceeded(run), 0)


def refusal(run: Run) -> str | None:
    """Why `run` cannot be retried now, or None. Reads no transfer row."""
    if run.state not in FINAL_RUN_STATES:
        return f"Run #{run.pk} is {run.state}: only a finished run can be retried."
    retries = sorted(r.pk for r in run.retries.all())  # all(): a list view prefetches them
    if retries:
        return f"Run #{run.pk} was already retried by run #{retries[0]}: retry that run instead."
    if _transfers_deleted(run):
        return f"Run #{run.pk}'s transfers were deleted by retention: which ones failed is no longer known."
    if run.files_done >= run.planned_files:
        return f"Run #{run.pk} has nothing to retry: all its {run.planned_files} planned transfers succeeded."
    if not _left(run):
        return (
            f"Run #{run.pk} has nothing to retry: of its {run.planned_files} planned transfers, {run.files_done} "
            "succeeded and the others are whole on their destination or were never needed."
        )
    return None


def _transfers_deleted(run: Run) -> bool:
    """Whether retention deleted the run's rows. A list of runs leaves the summary in the
    database and reads only this key of it (the API's transfers_deleted annotation)."""
    if "summary" in run.get_deferred_fields():
        return getattr(run, "transfers_deleted", None) not in (None, "", "0", "false")  # JSON as text
    return bool((run.summary or {}).get("archived", {}).get("transfers_deleted"))


def retryable_count(run: Run) -> int:
    """How many transfers "retry failed" would re-drive (0 when it would be refused): what the run
    page's button says, from the run's counters (the rows are read only for a run with cancelled
    copies, which may be whole on their destination)."""
    return 0 if refusal(run) else _left(run)


def retry_failed(run: Run, *, user: AnyUser | None = None, by: str = "", trigger: str) -> Run:
    """Create, and dispatch once committed, a run of `run`'s campaign that re-drives exactly the
    transfers of `run` that did not succeed; ValidationError when `run` is live, was already
    retried, lost its rows to retention, or has nothing to retry. `user`, or else `by`, started
    it (starting.starter_name)."""
    with transaction.atomic():
        # Under the old run's lock: two clicks at once make one retry, not two.
        run = Run.objects.select_for_update().select_related("campaign").get(pk=run.pk)
        reason = refusal(run)
        indices = [] if reason else retry_indices(run)
        if not indices:
            raise ValidationError(reason or f"Run #{run.pk} has nothing to retry: no planned transfer failed.")
        previous = RunSpec.of(run).retry
        snapshot = {
            **run.snapshot,
            "retry": {"of": run.pk, "indices": indices, "seed": previous.seed if previous else run.pk},
        }
        retry = new_run(run.campaign, snapshot, user=user, by=by, trigger=trigger, retry_of=run)
        log_event(
            "note",
            f"Retry of run #{run.pk}: {len(indices)} transfers (run #{retry.pk})",
            source="operator" if user else "storageops",
            run=retry,
            user=retry.started_by,
            who=retry.started_by_name,
        )
        transaction.on_commit(lambda: dispatch(retry.pk))
    return retry

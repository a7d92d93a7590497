"""A run's steps as rows (each a point of its sweep): which step is in force, and the move to the next one."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from campaigns.choices import TransferState
from campaigns.models import Run, RunStep, Transfer
from campaigns.spec import RunSpec


def current_step(run: Run, spec: RunSpec) -> RunStep:
    step = RunStep.objects.filter(run=run).order_by("-index").first()
    if step is None:
        point = spec.points[0]
        return RunStep.objects.create(
            run=run, index=0, concurrency=point.concurrency, point=point.as_dict(), started_at=timezone.now()
        )
    return step


def is_last(step: RunStep, spec: RunSpec) -> bool:
    return step.index + 1 >= len(spec.points)


def next_step(step: RunStep, spec: RunSpec) -> RunStep:
    now = timezone.now()
    with transaction.atomic():
        RunStep.objects.filter(pk=step.pk).update(ended_at=now)
        point = spec.points[step.index + 1]
        return RunStep.objects.create(
            run_id=step.run_id,
            index=step.index + 1,
            concurrency=point.concurrency,
            point=point.as_dict(),
            started_at=now,
        )


def claimed_in_step(run_id: int, index: int) -> int:
    """Transfers a step has claimed so far. A requeued orphan keeps its step number but is
    claimed (and counted) again when it is retried, so queued rows do not count here."""
    return Transfer.objects.filter(run_id=run_id, step=index).exclude(state=TransferState.QUEUED).count()


def steps_run(run_id: int) -> set[int]:
    """The steps a copy of the run was tried in. A claim given back before its copy started was
    no attempt (its row is queued again with no attempt made); a copy waiting for its retry was."""
    tried = Transfer.objects.filter(run_id=run_id, step__isnull=False).exclude(state=TransferState.QUEUED, attempt=0)
    return set(tried.values_list("step", flat=True).distinct())


def files_per_step(run_id: int) -> dict[int, int]:
    """How many of the run's transfers each step claimed (tried or still held)."""
    rows = Transfer.objects.filter(run_id=run_id, step__isnull=False).values_list("step").annotate(n=Count("id"))
    return dict(rows.order_by())


def end_open_steps(run_id: int, now) -> None:
    RunStep.objects.filter(run_id=run_id, ended_at__isnull=True).update(ended_at=now)

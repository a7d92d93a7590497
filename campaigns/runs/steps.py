"""A run's steps as rows (each a point of its sweep): which step is in force, and the move to the next one."""

from __future__ import annotations

from django.db import transaction
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


def end_open_steps(run_id: int, now) -> None:
    RunStep.objects.filter(run_id=run_id, ended_at__isnull=True).update(ended_at=now)

"""Who runs a readiness check, and what happens when nobody does any more.

As a run's driver, a check's worker holds a lease (ReadinessCheck.executor, heartbeat_at) taken
and renewed with conditional UPDATEs; it renews it every second while a step works, and reads a
cancel asked for on the page or through the API at the same time. The recovery task (beat's
"campaigns.recover_runs", every 15 s) ends a check whose worker fell silent for the lease time
("failed: worker lost", or "cancelled" if a cancel was asked) and sends its probe files' removal
to a transfers worker: the record says what was written where.
"""

from __future__ import annotations

import time
from datetime import timedelta

from celery import current_app
from django.conf import settings
from django.db.models import Q
from django.db.models.functions import Now
from django.utils import timezone

from campaigns.models import ReadinessCheck, ReadinessGrid
from campaigns.models.readiness import FINISHED_STATES
from campaigns.readiness.probes import BEING_REMOVED, close_unrun, left_behind
from storageops import alerting

State = ReadinessCheck.State
WORKER_LOST = "worker lost"


def _cutoff():
    # Heartbeats are written and judged by the database's clock, as runs' (campaigns.runs.leases).
    return Now() - timedelta(seconds=settings.STORAGEOPS_RUN_LEASE_SECONDS)


def take(check_id: int, executor: str) -> bool:
    """Start the queued check as `executor`; False if it is not queued any more (another worker
    took it, it was cancelled, it ended)."""
    now = timezone.now()
    return bool(
        ReadinessCheck.objects.filter(pk=check_id, state=State.QUEUED, cancel_requested_at__isnull=True).update(
            state=State.RUNNING, executor=executor, heartbeat_at=Now(), started_at=now, last_updated=now
        )
    )


def save(check_id: int, executor: str, **fields) -> bool:
    """Write `fields` and renew the lease; False once the check is not this worker's any more."""
    now = timezone.now()
    return bool(
        ReadinessCheck.objects.filter(pk=check_id, executor=executor, state=State.RUNNING).update(
            heartbeat_at=Now(), last_updated=now, **fields
        )
    )


class Watch:
    """Called every second while a step works (deadline.call_with_deadline's tick): renews the
    lease and says True when the step must stop, a cancel asked or the lease lost."""

    def __init__(self, check_id: int, executor: str) -> None:
        self.check_id, self.executor = check_id, executor
        self.lost = self.cancelled = False

    def __call__(self) -> bool:
        if not save(self.check_id, self.executor):
            self.lost = True
        elif ReadinessCheck.objects.filter(pk=self.check_id, cancel_requested_at__isnull=False).exists():
            self.cancelled = True
        return self.lost or self.cancelled


def request_cancel(check: ReadinessCheck) -> bool:
    """Cancel the check: a queued one ends at once (it wrote nothing); a running one is stopped
    by its worker within a second, its step's gfal2 call cancelled and its files removed.
    False for a check that already ended."""
    now = timezone.now()
    ended = ReadinessCheck.objects.filter(pk=check.pk, state=State.QUEUED).update(
        state=State.CANCELLED, cancel_requested_at=now, finished_at=now, last_updated=now,
        summary="Cancelled before a worker took it: nothing was written.",
    )  # fmt: skip
    if ended:
        finished(check.pk)
        return True
    running = ReadinessCheck.objects.filter(pk=check.pk, state=State.RUNNING)
    return bool(running.update(cancel_requested_at=now, last_updated=now))


def recover_lost_checks() -> list[int]:
    """End every running check whose worker is silent for longer than the lease, and send the
    removal of its files to a transfers worker."""
    cutoff = _cutoff()
    ended = []
    silent = (
        ReadinessCheck.objects.filter(state=State.RUNNING)
        .filter(Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True))
        .annotate(db_now=Now())
    )
    for check in silent:
        if _end_lost(check, cutoff):
            ended.append(check.pk)
            current_app.send_task("campaigns.readiness_remove_probes", (check.pk,))
    return ended


def _end_lost(check: ReadinessCheck, cutoff) -> bool:
    silent_for = (check.db_now - check.heartbeat_at).total_seconds() if check.heartbeat_at else 0
    said = f"no sign of life from {check.executor or 'its worker'} for {silent_for:.0f} s"
    steps = [
        {**s, "state": "failed", "stopped": True, "message": f"Ended mid-step: {WORKER_LOST} ({said})",
         "seconds": round(time.time() - s.get("started", time.time()), 3)}
        if s["state"] == "running" else s
        for s in check.steps
    ]  # fmt: skip
    steps = close_unrun(steps, f"the check ended, {WORKER_LOST}")
    cancelled = check.cancel_requested_at is not None
    state = State.CANCELLED if cancelled else State.FAILED
    # Said until the removal sent below records what became of them (`probes`).
    removing = BEING_REMOVED if left_behind(steps) else ""
    summary = f"{'cancelled' if cancelled else 'failed'}: {WORKER_LOST} ({said})"[: 300 - len(removing)] + removing
    now = timezone.now()
    taken = (
        ReadinessCheck.objects.filter(pk=check.pk, state=State.RUNNING, executor=check.executor)
        .filter(Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True))
        .update(state=state, steps=steps, summary=summary, finished_at=now, last_updated=now)
    )
    if taken:
        finished(check.pk)
    return bool(taken)


def finished(check_id: int) -> None:
    """A check ended: if it was the last of its grid, the grid ends too, and a scheduled grid
    with a check that did not pass goes to the alerts (by name: campaigns does not import alerts)."""
    grid_id = ReadinessCheck.objects.filter(pk=check_id).values_list("grid_id", flat=True).first()
    if grid_id is None or ReadinessCheck.objects.filter(grid_id=grid_id).exclude(state__in=FINISHED_STATES).exists():
        return
    if not ReadinessGrid.objects.filter(pk=grid_id, ended_at__isnull=True).update(ended_at=timezone.now()):
        return  # another check's ending got there first
    grid = ReadinessGrid.objects.get(pk=grid_id)
    failed = ReadinessCheck.objects.filter(grid_id=grid_id).exclude(state=State.PASSED).exists()
    if grid.trigger == ReadinessGrid.Trigger.SCHEDULE and failed:
        alerting.tell("readiness_grid_failed", grid_id)

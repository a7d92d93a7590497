"""Celery tasks of the campaigns app: thin wrappers around the run services."""

from __future__ import annotations

from celery import shared_task
from celery.signals import worker_ready
from django.conf import settings
from django.utils.dateparse import parse_datetime

from campaigns import readiness, runs
from campaigns.models import ReadinessCheck, Run
from campaigns.readiness import grid as readiness_grid
from campaigns.readiness import lease as readiness_lease
from campaigns.readiness import probes as readiness_probes
from campaigns.runs import cleanup, scheduling, storage, tokens
from campaigns.runs.client_pool import serve
from campaigns.runs.lifecycle import RunDriver


@shared_task(name="campaigns.drive_run", ignore_result=True, acks_late=False)
def drive_run(run_id: int) -> str:
    # No time limit: a campaign may run for weeks. Liveness is the lease's job: a silent
    # driver loses its run to the next worker after STORAGEOPS_RUN_LEASE_SECONDS.
    return RunDriver(run_id).drive()


@shared_task(name="campaigns.client_serve", ignore_result=True, acks_late=False)
def client_serve(run_id: int, drive: str, client: str) -> dict:
    # On the client's own queue (client.NAME), sent by the run's driver: copies this client's
    # share of the run until the driver says stop or is gone. No time limit, as drive_run.
    return serve.serve(run_id, drive, client)


@shared_task(name="campaigns.recover_runs", soft_time_limit=60, time_limit=90)
def recover_runs() -> list[int]:
    # Readiness checks hold leases as runs do: the same beat entry ends those whose worker died.
    readiness_lease.recover_lost_checks()
    return runs.recover_stale_runs()


@worker_ready.connect
def _recover_after_start(sender=None, **kwargs) -> None:
    # A worker that (re)starts looks for runs whose driver died, once their lease expired.
    recover_runs.apply_async(countdown=settings.STORAGEOPS_RUN_LEASE_SECONDS + 1)


@shared_task(name="campaigns.scheduled_start", ignore_result=True, soft_time_limit=60, time_limit=90)
def scheduled_start(schedule_id: int, due_at: str | None = None) -> str:
    # Beat's scheduler (storageops.beat) says when this start was due; by hand, it is due now.
    return scheduling.fire(schedule_id, parse_datetime(due_at) if due_at else None).reason


@shared_task(name="campaigns.cleanup_run", ignore_result=True, soft_time_limit=6 * 3600, time_limit=6 * 3600 + 60)
def cleanup_run(run_id: int) -> dict:
    # A clean-up asked for by hand (a run that kept its files, or one whose clean-up failed).
    run = Run.objects.get(pk=run_id)
    with tokens.lent_to(storage.for_run(run.snapshot), run.snapshot, run.pk) as copier:
        return cleanup.cleanup_run(run, copier)


@shared_task(name="campaigns.readiness_check", ignore_result=True, soft_time_limit=3600, time_limit=3660)
def readiness_check(check_id: int) -> str:
    # On the transfers queue: its steps are gfal2 operations against the storage, as copies are.
    # The time limit is a last resort: each step has its own deadline, the lease tells liveness.
    return readiness.run_check(ReadinessCheck.objects.select_related("endpoint", "peer").get(pk=check_id)).state


@shared_task(name="campaigns.readiness_remove_probes", ignore_result=True, soft_time_limit=3600, time_limit=3660)
def readiness_remove_probes(check_id: int) -> list[str]:
    # Sent by the recovery for a check whose worker died: its files, read from its record, and
    # what became of them written back to it.
    check = ReadinessCheck.objects.select_related("endpoint", "peer").get(pk=check_id)
    return readiness_probes.remove_after_lost_worker(check)


@shared_task(name="campaigns.readiness_grid", ignore_result=True, soft_time_limit=60, time_limit=90)
def readiness_grid_start() -> int:
    # The daily schedule's task (a django-celery-beat PeriodicTask the grid page sets).
    return readiness_grid.start_grid(trigger="schedule").pk

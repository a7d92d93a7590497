"""Celery tasks of the alerts app: thin wrappers, sent by name so the run code does not import alerts."""

from __future__ import annotations

from celery import shared_task

from alerts import triggers
from campaigns.models import ReadinessGrid, Run
from collectors.models import Event


@shared_task(name="alerts.run_finished", ignore_result=True, soft_time_limit=120, time_limit=150)
def run_finished(run_id: int) -> int:
    return len(triggers.run_finished(Run.objects.select_related("campaign").get(pk=run_id)))


@shared_task(name="alerts.run_stalled", ignore_result=True, soft_time_limit=120, time_limit=150)
def run_stalled(run_id: int, summary: str) -> int:
    return len(triggers.run_stalled(Run.objects.select_related("campaign").get(pk=run_id), summary))


@shared_task(name="alerts.collectors_silent", ignore_result=True, soft_time_limit=50, time_limit=60)
def collectors_silent() -> int:
    return len(triggers.collectors_silent())


@shared_task(name="alerts.readiness_grid_failed", ignore_result=True, soft_time_limit=120, time_limit=150)
def readiness_grid_failed(grid_id: int) -> int:
    # Sent by name when the last check of a scheduled readiness grid ended and one did not pass.
    return len(triggers.readiness_grid_failed(ReadinessGrid.objects.get(pk=grid_id)))


@shared_task(name="alerts.disk_full", ignore_result=True, soft_time_limit=120, time_limit=150)
def disk_full(event_id: int) -> int:
    # Told by a host's collector when a watched filesystem fills up.
    return len(triggers.disk_full(Event.objects.select_related("host").get(pk=event_id)))

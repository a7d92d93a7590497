"""Celery tasks of the alerts app: thin wrappers, sent by name so the run code does not import alerts.

Each is tried again when the database does not answer (5, 10, 20, 40, 60 s later, with jitter):
an alert whose one chance met a database restart was lost, as a collector's silence was in the
soak (docs/soak.md) when beat's check of that minute found PostgreSQL down. A try that failed
before it sent anything sends it on the next; only a database lost between a mail and its
delivery's record could send one twice, which is better than an alert never sent.
"""

from __future__ import annotations

from celery import shared_task
from django.db import InterfaceError, OperationalError

from alerts import triggers
from campaigns.models import ReadinessGrid, Run
from collectors.models import Event

#: Celery's options for a task tried again while the database is away.
OUTAGE_RETRY = {
    "autoretry_for": (OperationalError, InterfaceError),
    "retry_backoff": 5,
    "retry_backoff_max": 60,
    "max_retries": 5,
}


@shared_task(name="alerts.run_finished", ignore_result=True, **OUTAGE_RETRY, soft_time_limit=120, time_limit=150)
def run_finished(run_id: int) -> int:
    return len(triggers.run_finished(Run.objects.select_related("campaign").get(pk=run_id)))


@shared_task(name="alerts.run_stalled", ignore_result=True, **OUTAGE_RETRY, soft_time_limit=120, time_limit=150)
def run_stalled(run_id: int, summary: str) -> int:
    return len(triggers.run_stalled(Run.objects.select_related("campaign").get(pk=run_id), summary))


@shared_task(name="alerts.collectors_silent", ignore_result=True, **OUTAGE_RETRY, soft_time_limit=50, time_limit=60)
def collectors_silent() -> int:
    return len(triggers.collectors_silent())


@shared_task(
    name="alerts.readiness_grid_failed", ignore_result=True, **OUTAGE_RETRY, soft_time_limit=120, time_limit=150
)
def readiness_grid_failed(grid_id: int) -> int:
    # Sent by name when the last check of a scheduled readiness grid ended and one did not pass.
    return len(triggers.readiness_grid_failed(ReadinessGrid.objects.get(pk=grid_id)))


@shared_task(name="alerts.disk_full", ignore_result=True, **OUTAGE_RETRY, soft_time_limit=120, time_limit=150)
def disk_full(event_id: int) -> int:
    # Told by a host's collector when a watched filesystem fills up.
    return len(triggers.disk_full(Event.objects.select_related("host").get(pk=event_id)))

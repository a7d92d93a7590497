"""Periodic tasks StorageOps itself needs, kept in django-celery-beat's database scheduler.

They are (re)written after every migrate, so an upgrade that adds one needs no manual step,
and an operator can still see and pause them in the admin like any other schedule.
"""

from __future__ import annotations

BUILTIN = (
    # (name, task, every seconds)
    ("StorageOps: recover runs whose driver died", "campaigns.recover_runs", 15),
    ("StorageOps: scrape hosts' node_exporter", "collectors.node_exporter.scrape", 15),
    ("StorageOps: retention of old transfers and samples", "storageops.retention", 3600),
    ("StorageOps: alert on collectors gone silent", "alerts.collectors_silent", 60),
)


def ensure_builtin_schedules() -> None:
    from django.conf import settings
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    for name, task, seconds in BUILTIN:
        interval, _ = IntervalSchedule.objects.get_or_create(every=seconds, period=IntervalSchedule.SECONDS)
        PeriodicTask.objects.update_or_create(
            name=name, defaults={"task": task, "interval": interval, "queue": settings.STORAGEOPS_CONTROL_QUEUE}
        )

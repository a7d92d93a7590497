"""Periodic tasks StorageOps itself needs, kept in django-celery-beat's database scheduler.

Each app registers its own in its ready() (storageops names no app's task); they are (re)written
after every migrate, so an upgrade that adds one needs no manual step, and an operator can still
see and pause them in the admin like any other schedule.
"""

from __future__ import annotations

from typing import NamedTuple


class Builtin(NamedTuple):
    name: str  # as the admin lists it
    task: str  # the Celery task's name
    seconds: int  # how often


_builtin: dict[str, Builtin] = {}


def register(name: str, task: str, seconds: int) -> None:
    _builtin[name] = Builtin(name, task, seconds)


def builtin() -> list[Builtin]:
    return list(_builtin.values())


def ensure_builtin_schedules() -> None:
    from django.conf import settings
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    for name, task, seconds in builtin():
        interval, _ = IntervalSchedule.objects.get_or_create(every=seconds, period=IntervalSchedule.SECONDS)
        PeriodicTask.objects.update_or_create(
            name=name, defaults={"task": task, "interval": interval, "queue": settings.STORAGEOPS_CONTROL_QUEUE}
        )

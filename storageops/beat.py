"""Celery beat's database scheduler, telling scheduled campaign starts when they were due.

Beat sends a task when it is due, but the message does not say when that was: a task
that waits in a busy queue, or one beat sends late because it was down, looks on time.
The start decision needs the due time to honour a campaign's maximum slip, so this
scheduler adds it (`due_at`) to the messages of the tasks that asked for it (campaigns registers
its scheduled start in its ready(): storageops names no app's task).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from celery.utils.time import maybe_make_aware
from django_celery_beat.schedulers import DatabaseScheduler

_told_due_time: set[str] = set()


def tell_due_time(task: str) -> None:
    """Have beat add `due_at` (ISO 8601) to the keyword arguments of every message of `task`."""
    _told_due_time.add(task)


def due_time(entry, now: datetime) -> datetime:
    """The occurrence an entry is being sent for: the first one after its last run."""
    due = now + entry.schedule.remaining_estimate(maybe_make_aware(entry.last_run_at))
    # Two clock readings make it off by microseconds: round to the second it names.
    return (due + timedelta(microseconds=500_000)).replace(microsecond=0)


class Scheduler(DatabaseScheduler):
    def apply_async(self, entry, producer=None, advance=True, **kwargs):
        if entry.task not in _told_due_time:
            return super().apply_async(entry, producer, advance, **kwargs)
        # beat's tick() reserves the entry (moving its last run on) and then sends the entry
        # it had, whose last_run_at is still the previous run's: the due time comes from it.
        due = due_time(entry, self.app.now())
        if advance:
            self.reserve(entry)
        # The entry sent is the one just replaced in the schedule (tick() reserved it), so
        # giving it the due time for this one message touches nothing beat keeps.
        kept = entry.kwargs
        entry.kwargs = {**kept, "due_at": due.isoformat()}
        try:
            return super().apply_async(entry, producer, advance=False, **kwargs)
        finally:
            entry.kwargs = kept

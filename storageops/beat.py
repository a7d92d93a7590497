"""Celery beat's database scheduler, telling scheduled campaign starts when they were due.

Beat sends a task when it is due, but the message does not say when that was: a task
that waits in a busy queue, or one beat sends late because it was down, looks on time.
The start decision needs the due time to honour a campaign's maximum slip, so this
scheduler adds it (`due_at`) to the messages of scheduled campaign starts.
"""

from __future__ import annotations

from datetime import timedelta

from celery.utils.time import maybe_make_aware
from django_celery_beat.schedulers import DatabaseScheduler

SCHEDULED_START_TASK = "campaigns.scheduled_start"


class Scheduler(DatabaseScheduler):
    def reserve(self, entry):
        due = None
        if entry.task == SCHEDULED_START_TASK:
            # Computed from the last run before reserve() moves it on: the occurrence being sent now.
            last = maybe_make_aware(entry.last_run_at)
            due = self.app.now() + entry.schedule.remaining_estimate(last)
            # Two clock readings make it off by microseconds: round to the second it names.
            due = (due + timedelta(microseconds=500_000)).replace(microsecond=0)
        new_entry = super().reserve(entry)
        if due is not None:
            # The reserved entry is rebuilt from the database row, so this never reaches the row.
            new_entry.kwargs = {**new_entry.kwargs, "due_at": due.isoformat()}
        return new_entry

"""The FTS app's Celery task: the driver of an FTS run (the engine's EngineEntry.drive_task).

It keeps the name it had as a campaigns task, "campaigns.drive_fts_run": messages already
queued and anything that sends it by name (the engine registry's entry) find it unchanged,
whatever module declares it.
"""

from __future__ import annotations

from celery import shared_task

from campaigns.runs.lifecycle import RunDriver


@shared_task(name="campaigns.drive_fts_run", ignore_result=True, acks_late=False)
def drive_fts_run(run_id: int) -> str:
    # On "transfers" with every run's driver (CELERY_TASK_ROUTES): it waits on FTS for the whole
    # run, which on "control" would hold a slot beat's short tasks need. No time limit, as
    # drive_run: the run's lease tells whether its driver lives.
    return RunDriver(run_id).drive()

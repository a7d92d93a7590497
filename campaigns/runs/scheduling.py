"""Scheduled campaign starts: the beat task a schedule owns, and the decision when it fires.

A schedule's PeriodicTask is written here and only here (create, edit, enable, delete), so
beat always runs what the schedule says. When beat fires, `fire` decides: the start
happens only inside the allowed window, no later than the allowed slip, within the run
count and the byte budgets, and not over another run on the same destination endpoint
or backend. Every decision, a skip above all, is recorded as an Event.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from campaigns import runs
from campaigns.choices import ScheduleKind
from campaigns.models import Backend, Campaign, CampaignSchedule, Run
from campaigns.runs import guards
from collectors.events import log_event

log = logging.getLogger(__name__)
# The task beat sends for a schedule (campaigns.tasks.scheduled_start), told its due time by
# storageops.beat (registered in CampaignsConfig.ready()).
SCHEDULED_START_TASK = "campaigns.scheduled_start"


# -- keeping beat's PeriodicTask in step ------------------------------------------------------
def save_schedule(schedule: CampaignSchedule) -> CampaignSchedule:
    """Validate, save, and make beat's task say the same; one transaction, so never half done."""
    schedule.full_clean()
    if not schedule.end_reason():  # more runs or a later end given: it may start runs again
        schedule.finished_at, schedule.finished_reason = None, ""
    with transaction.atomic():
        schedule.save()
        sync_periodic_task(schedule)
    return schedule


def delete_schedule(schedule: CampaignSchedule) -> None:
    with transaction.atomic():
        schedule.delete()  # its task goes with it (forget_periodic_task)


def forget_periodic_task(schedule: CampaignSchedule) -> None:
    """After a schedule is deleted, however (its campaign deleted too): beat stops firing it."""
    if schedule.periodic_task_id is not None:
        from django_celery_beat.models import PeriodicTask

        for task in PeriodicTask.objects.filter(pk=schedule.periodic_task_id):
            task.delete()  # one by one, so beat's change signal fires


def sync_periodic_task(schedule: CampaignSchedule) -> None:
    from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask

    fields: dict = {
        "name": f"StorageOps campaign schedule {schedule.pk}"[:200],
        "task": SCHEDULED_START_TASK,
        "kwargs": json.dumps({"schedule_id": schedule.pk}),
        "queue": settings.STORAGEOPS_CONTROL_QUEUE,
        "enabled": schedule.enabled and not schedule.end_reason(),
        "description": f"Starts campaign {schedule.campaign.name}; edit it on the campaign's page, not here.",
        "crontab": None,
        "interval": None,
    }
    if schedule.kind == ScheduleKind.CRON:
        minute, hour, day_of_month, month_of_year, day_of_week = schedule.cron.split()
        fields["crontab"], _ = CrontabSchedule.objects.get_or_create(
            minute=minute,
            hour=hour,
            day_of_month=day_of_month,
            month_of_year=month_of_year,
            day_of_week=day_of_week,
            timezone=ZoneInfo(schedule.time_zone),
        )
    else:
        fields["interval"], _ = IntervalSchedule.objects.get_or_create(
            every=schedule.interval_minutes, period=IntervalSchedule.MINUTES
        )
    task = schedule.periodic_task or PeriodicTask()
    for key, value in fields.items():
        setattr(task, key, value)
    task.save()  # its signals tell a running beat that the schedule changed
    if schedule.periodic_task_id != task.pk:
        schedule.periodic_task = task
        CampaignSchedule.objects.filter(pk=schedule.pk).update(periodic_task=task)


# -- the decision when beat fires -------------------------------------------------------------
@dataclass(frozen=True)
class Decision:
    started: Run | None
    reason: str


def _record(schedule: CampaignSchedule, reason: str, *, due_at: datetime, now: datetime, run=None) -> Decision:
    campaign = schedule.campaign
    summary = (
        f"Scheduled start of {campaign.name}: run #{run.pk}"
        if run
        else f"Scheduled start of {campaign.name} skipped: {reason}"
    )
    detail = {
        "schedule": schedule.pk,
        "campaign": campaign.pk,
        "due_at": due_at.isoformat(),
        "decided_at": now.isoformat(),
        "reason": reason,
    }
    log_event("schedule", summary, run=run, detail=json.dumps(detail))
    CampaignSchedule.objects.filter(pk=schedule.pk).update(last_decision=summary[:300])
    log.info("%s", summary)
    return Decision(run, reason)


def fire(schedule_id: int, due_at: datetime | None = None, now: datetime | None = None) -> Decision:
    """Start the schedule's campaign if every rule allows it; record why not otherwise."""
    now = now or timezone.now()
    due_at = due_at or now
    schedule = CampaignSchedule.objects.select_related("campaign").filter(pk=schedule_id).first()
    if schedule is None:
        return Decision(None, "the schedule no longer exists")
    # Claim this due time once (a conditional UPDATE): a message delivered twice starts once.
    claimed = (
        CampaignSchedule.objects.filter(pk=schedule_id)
        .filter(Q(last_due_at__isnull=True) | Q(last_due_at__lt=due_at))
        .update(last_due_at=due_at)
    )
    reason = None
    if not claimed:
        reason = f"the start due at {due_at:%Y-%m-%d %H:%M:%S} was already handled"
    elif not schedule.enabled:
        reason = "the schedule is disabled"
    elif schedule.exhausted:
        reason = f"the schedule's {schedule.max_runs} runs are done"
        finish(schedule, now)
    elif schedule.past_end(now):
        reason = f"the schedule ended at {schedule.ends_at:%Y-%m-%d %H:%M} UTC"
        finish(schedule, now)
    else:
        reason = guards.slip_reason(due_at, now, schedule.max_slip_minutes) or guards.window_reason(schedule, now)
    if reason:
        return _record(schedule, reason, due_at=due_at, now=now)
    return _start(schedule, due_at=due_at, now=now)


def _start(schedule: CampaignSchedule, *, due_at: datetime, now: datetime) -> Decision:
    campaign: Campaign = schedule.campaign
    try:
        with transaction.atomic():
            if not campaign.allow_overlap:
                # Row locks on the backends written to: two schedules firing together for one
                # backend take turns, and the second sees the first one's run.
                list(Backend.objects.select_for_update().filter(pk__in=guards.written_backend_ids(campaign)))
                overlap = guards.overlap_reason(campaign)
                if overlap:
                    raise ValidationError(f"overlap: {overlap} (the campaign does not allow overlapping runs)")
            # Which schedule, and what it said then: it may be edited or deleted after.
            run = runs.start_run(campaign, by=f"schedule #{schedule.pk}: {schedule.describe()}", trigger="schedule")
            CampaignSchedule.objects.filter(pk=schedule.pk).update(runs_started=F("runs_started") + 1)
    except ValidationError as exc:
        return _record(schedule, "; ".join(exc.messages), due_at=due_at, now=now)
    schedule.refresh_from_db()
    decision = _record(schedule, "started", due_at=due_at, now=now, run=run)
    if schedule.exhausted:
        finish(schedule, now)  # the last allowed run: beat stops firing, and the page says so
    return decision


def finish(schedule: CampaignSchedule, now: datetime | None = None) -> bool:
    """Mark a schedule that will start nothing more (max runs reached, end date passed) as
    finished, once, with an event, and stop beat firing it. False if it was marked already."""
    now = now or timezone.now()
    reason = schedule.end_reason(now)
    if not reason:
        return False
    marked = CampaignSchedule.objects.filter(pk=schedule.pk, finished_at__isnull=True).update(
        finished_at=now, finished_reason=reason
    )
    schedule.finished_at, schedule.finished_reason = now, reason
    sync_periodic_task(schedule)
    if not marked:
        return False
    campaign = schedule.campaign
    runs_told = f"{schedule.runs_started} run{'s' if schedule.runs_started != 1 else ''} started"
    summary = f"Schedule of {campaign.name} finished: {reason} ({runs_told})"
    detail = {"schedule": schedule.pk, "campaign": campaign.pk, "finished": reason}
    detail["runs_started"] = schedule.runs_started
    log_event("schedule", summary, detail=json.dumps(detail))
    CampaignSchedule.objects.filter(pk=schedule.pk).update(last_decision=summary[:300])
    log.info("%s", summary)
    return True

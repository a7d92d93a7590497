"""The start decision of a schedule: window, slip, max runs, overlap and budgets, each skip recorded."""

from __future__ import annotations

import json
from datetime import UTC, datetime, time, timedelta

import pytest
from django.core.exceptions import ValidationError
from django_celery_beat.models import PeriodicTask

from campaigns import runs
from campaigns.choices import RunState
from campaigns.models import CampaignSchedule, Run, parse_weekdays
from campaigns.runs import guards, scheduling
from campaigns.runs.lifecycle import RunDriver
from campaigns.spec import RunSpec
from collectors.models import Event
from tests.support.factories import endpoint, mock_campaign

pytestmark = pytest.mark.django_db

# A Wednesday, 10:30 in Prague (09:30 UTC).
WEDNESDAY = datetime(2026, 11, 25, 9, 30, tzinfo=UTC)


def schedule_for(campaign, **fields) -> CampaignSchedule:
    values = {"kind": "cron", "cron": "* * * * *", "time_zone": "Europe/Prague", **fields}
    return scheduling.save_schedule(CampaignSchedule(campaign=campaign, **values))


def skips(campaign) -> list[str]:
    return list(
        Event.objects.filter(kind="schedule", summary__startswith=f"Scheduled start of {campaign.name} skipped")
        .order_by("time")
        .values_list("summary", flat=True)
    )


def test_weekdays_parse_ranges_lists_and_wrap():
    assert parse_weekdays("mon-fri") == {0, 1, 2, 3, 4}
    assert parse_weekdays("sat, mon") == {0, 5}
    assert parse_weekdays("fri-mon") == {4, 5, 6, 0}
    assert parse_weekdays("") == set(range(7))
    with pytest.raises(ValueError, match="not a weekday"):
        parse_weekdays("monday")


def test_window_in_the_schedules_time_zone():
    s = CampaignSchedule(time_zone="Europe/Prague", window_days="mon-fri", window_start=time(9), window_end=time(16))
    assert guards.window_reason(s, WEDNESDAY) is None  # 10:30 local
    assert "outside the allowed window 09:00-16:00" in guards.window_reason(s, WEDNESDAY.replace(hour=15))
    assert "outside the allowed days" in guards.window_reason(s, WEDNESDAY + timedelta(days=3))  # Saturday
    night = CampaignSchedule(time_zone="UTC", window_start=time(22), window_end=time(6))
    assert guards.window_reason(night, WEDNESDAY.replace(hour=23)) is None
    assert guards.window_reason(night, WEDNESDAY.replace(hour=5, minute=59)) is None
    assert guards.window_reason(night, WEDNESDAY.replace(hour=6)) is not None


def test_slip():
    assert guards.slip_reason(WEDNESDAY, WEDNESDAY + timedelta(minutes=10), 10) is None
    reason = guards.slip_reason(WEDNESDAY, WEDNESDAY + timedelta(minutes=11), 10)
    assert reason.startswith("started 11.0 min after its due time") and "max slip 10 min" in reason


def test_schedule_validation_names_the_field():
    campaign = mock_campaign("val")
    cases = [
        ({"cron": "61 * * * *"}, "cron"),
        ({"cron": "* * *"}, "cron"),
        ({"kind": "interval", "cron": ""}, "interval_minutes"),
        ({"time_zone": "Mars/Olympus"}, "time_zone"),
        ({"window_days": "weekends"}, "window_days"),
        ({"window_start": time(9)}, "window_end"),
    ]
    for fields, field in cases:
        with pytest.raises(ValidationError) as info:
            schedule_for(campaign, **fields)
        assert field in info.value.message_dict, (fields, info.value.message_dict)
    assert not CampaignSchedule.objects.exists()
    assert not PeriodicTask.objects.filter(task="campaigns.scheduled_start").exists()


def test_the_periodic_task_follows_the_schedule():
    campaign = mock_campaign("sync")
    s = schedule_for(campaign, cron="0 9 * * 1-5")
    task = PeriodicTask.objects.get(pk=s.periodic_task_id)
    assert task.task == "campaigns.scheduled_start" and task.enabled
    assert json.loads(task.kwargs) == {"schedule_id": s.pk}
    cron = task.crontab
    assert (cron.minute, cron.hour, cron.day_of_week, str(cron.timezone)) == ("0", "9", "1-5", "Europe/Prague")
    s.kind, s.interval_minutes, s.enabled = "interval", 30, False
    scheduling.save_schedule(s)
    task.refresh_from_db()
    assert task.crontab is None and task.interval.every == 30 and task.interval.period == "minutes"
    assert not task.enabled
    scheduling.delete_schedule(s)
    assert not PeriodicTask.objects.filter(pk=task.pk).exists()


def test_a_due_start_inside_the_window_starts_a_run_and_says_so():
    campaign = mock_campaign("go")
    s = schedule_for(campaign, window_days="mon-fri", window_start=time(9), window_end=time(16), max_runs=2)
    decision = scheduling.fire(s.pk, due_at=WEDNESDAY, now=WEDNESDAY + timedelta(seconds=3))
    assert decision.started is not None and decision.started.trigger == "schedule"
    event = Event.objects.get(kind="schedule", run_id=decision.started.pk)
    assert event.summary == f"Scheduled start of go: run #{decision.started.pk}"
    s.refresh_from_db()
    assert s.runs_started == 1 and s.last_decision == event.summary


def test_skips_are_recorded_with_their_reason():
    campaign = mock_campaign("skip")
    s = schedule_for(campaign, window_days="mon-fri", window_start=time(9), window_end=time(16), max_slip_minutes=5)
    late = WEDNESDAY + timedelta(minutes=1)
    assert scheduling.fire(s.pk, due_at=late, now=late + timedelta(minutes=6)).started is None
    # The same due time delivered twice (a redelivered message) is handled once.
    on_time = WEDNESDAY + timedelta(minutes=2)
    assert scheduling.fire(s.pk, due_at=on_time, now=on_time).started is not None
    assert scheduling.fire(s.pk, due_at=on_time, now=on_time).started is None
    evening = WEDNESDAY.replace(hour=17)
    assert scheduling.fire(s.pk, due_at=evening, now=evening).started is None
    saturday = WEDNESDAY + timedelta(days=3)
    assert scheduling.fire(s.pk, due_at=saturday, now=saturday).started is None
    reasons = skips(campaign)
    assert len(reasons) == 4
    assert "started 6.0 min after its due time 2026-11-25 09:31 (max slip 5 min)" in reasons[0]
    assert "the start due at 2026-11-25 09:32:00 was already handled" in reasons[1]
    assert "outside the allowed window 09:00-16:00 Europe/Prague: it is Wed 18:30" in reasons[2]
    assert "outside the allowed days (mon-fri): it is Saturday 10:30 Europe/Prague" in reasons[3]
    assert Run.objects.filter(campaign=campaign).count() == 1


def test_max_runs_then_the_task_is_disabled():
    campaign = mock_campaign("twice", allow_overlap=True)
    s = schedule_for(campaign, max_runs=2)
    for minute in range(3):
        due = WEDNESDAY + timedelta(minutes=minute)
        scheduling.fire(s.pk, due_at=due, now=due)
    assert Run.objects.filter(campaign=campaign, trigger="schedule").count() == 2
    assert not PeriodicTask.objects.get(pk=s.periodic_task_id).enabled
    assert "the schedule's 2 runs are done" in skips(campaign)[0]
    # Issue 34: the schedule says it finished, once, and no longer reads "enabled".
    s.refresh_from_db()
    assert s.status == "finished: max runs reached" and s.finished_at == WEDNESDAY + timedelta(minutes=1)
    [ended] = Event.objects.filter(kind="schedule", summary__contains="finished")
    assert ended.summary == "Schedule of twice finished: max runs reached (2 runs started)"
    # More runs allowed: it may start again, and finishes again at the new count.
    s.max_runs = 3
    scheduling.save_schedule(s)
    assert s.status == "enabled" and s.finished_at is None and PeriodicTask.objects.get(pk=s.periodic_task_id).enabled
    due = WEDNESDAY + timedelta(minutes=5)
    assert scheduling.fire(s.pk, due_at=due, now=due).started is not None
    s.refresh_from_db()
    assert s.status == "finished: max runs reached"
    assert Event.objects.filter(kind="schedule", summary__contains="finished").count() == 2


def test_a_schedule_past_its_end_date_finishes_and_says_so(client, viewer):
    campaign = mock_campaign("until-noon", allow_overlap=True)
    s = schedule_for(campaign, ends_at=WEDNESDAY + timedelta(minutes=1, seconds=30))
    for minute in range(3):
        due = WEDNESDAY + timedelta(minutes=minute)
        scheduling.fire(s.pk, due_at=due, now=due)
    assert Run.objects.filter(campaign=campaign, trigger="schedule").count() == 2
    assert "the schedule ended at 2026-11-25 09:31 UTC" in skips(campaign)[0]
    s.refresh_from_db()
    assert s.status == "finished: past its end date" and not PeriodicTask.objects.get(pk=s.periodic_task_id).enabled
    assert Event.objects.filter(summary="Schedule of until-noon finished: past its end date (2 runs started)").exists()
    client.force_login(viewer)
    page = client.get(f"/campaigns/{campaign.pk}/schedule/").content.decode()  # the card the campaign page loads
    assert 'data-schedule-status="finished: past its end date"' in page
    api = client.get(f"/api/v1/schedules/{s.pk}/").json()
    assert api["status"] == "finished: past its end date" and api["finished_reason"] == "past its end date"


def test_overlap_on_the_destination_backend_is_refused_unless_allowed():
    busy = mock_campaign("busy")
    running = runs.create_run(busy, trigger="command")  # pending: in flight as far as overlap goes
    # Another campaign writing to a different endpoint of the same backend.
    other_dst = endpoint("other-dst", "mock://dst2.test/data/?time=0", backend_name="xrootd-disk")
    polite = mock_campaign("polite")
    polite.destinations.set([other_dst])
    s = schedule_for(polite)
    decision = scheduling.fire(s.pk, due_at=WEDNESDAY, now=WEDNESDAY)
    assert decision.started is None
    assert f"overlap: run #{running.pk} (pending) is writing to backend xrootd-disk" in skips(polite)[0]

    polite.allow_overlap = True
    polite.save()
    later = WEDNESDAY + timedelta(minutes=1)
    assert scheduling.fire(s.pk, due_at=later, now=later).started is not None


def test_overlap_on_the_same_endpoint_and_ended_runs_do_not_count():
    busy = mock_campaign("busy2")
    run = runs.create_run(busy, trigger="command")
    s = schedule_for(busy)
    assert scheduling.fire(s.pk, due_at=WEDNESDAY, now=WEDNESDAY).started is None
    assert "is writing to endpoint busy2-dst" in skips(busy)[0]
    Run.objects.filter(pk=run.pk).update(state=RunState.SUCCEEDED)
    later = WEDNESDAY + timedelta(minutes=1)
    assert scheduling.fire(s.pk, due_at=later, now=later).started is not None


def test_daily_budget_used_up_skips_and_a_partial_budget_stops_the_run(settings):
    campaign = mock_campaign("budget", file_count=10, file_size=1000, max_bytes_per_day=3500, concurrency_steps=[1])
    first = runs.create_run(campaign, trigger="command")
    # The run may move what is left of the day's budget; the campaign's own value stays as it was.
    assert (RunSpec.of(first).max_bytes, RunSpec.of(first).campaign_max_bytes) == (3500, None)
    assert first.snapshot["parameters"]["max_bytes"] is None
    # Files were left untried by the budget: the run is partial, and says which budget.
    assert RunDriver(first.pk).drive() == RunState.PARTIAL
    first.refresh_from_db()
    assert first.stop_reason.startswith("daily byte budget reached")
    assert 3500 <= first.bytes_done <= 4000  # at most one file over
    Run.objects.filter(pk=first.pk).update(bytes_done=3500)
    s = schedule_for(campaign)
    now = datetime.now(UTC)
    assert scheduling.fire(s.pk, due_at=now, now=now).started is None
    assert "daily byte budget is used up (3500 of 3500 bytes moved)" in skips(campaign)[0]
    # Yesterday's bytes do not count today.
    Run.objects.filter(pk=first.pk).update(created=now - timedelta(days=1))
    later = now + timedelta(seconds=1)
    assert scheduling.fire(s.pk, due_at=later, now=later).started is not None


def test_a_manual_start_respects_the_weekly_budget():
    campaign = mock_campaign("weekly", file_count=2, file_size=1000, max_bytes_per_week=1000)
    run = runs.create_run(campaign, trigger="command")
    Run.objects.filter(pk=run.pk).update(bytes_done=1000, state=RunState.SUCCEEDED)
    with pytest.raises(ValidationError, match="weekly byte budget is used up"):
        runs.create_run(campaign, trigger="api")


def test_beat_scheduler_names_the_occurrence_a_late_message_is_for():
    from django_celery_beat.schedulers import ModelEntry

    from storageops.beat import due_time
    from storageops.celery import app

    s = schedule_for(mock_campaign("due"), cron="*/5 * * * *", time_zone="UTC")
    task = PeriodicTask.objects.get(pk=s.periodic_task_id)
    last = datetime.now(UTC).replace(second=12, microsecond=0) - timedelta(hours=1)
    task.last_run_at = last
    entry = ModelEntry(task, app=app)
    expected = last.replace(second=0) + timedelta(minutes=5 - last.minute % 5)
    assert due_time(entry, app.now()) == expected


def test_deleting_the_campaign_takes_its_beat_task_along():
    campaign = mock_campaign("gone")
    s = schedule_for(campaign)
    task_id = s.periodic_task_id
    campaign.delete()
    assert not CampaignSchedule.objects.exists()
    assert not PeriodicTask.objects.filter(pk=task_id).exists()

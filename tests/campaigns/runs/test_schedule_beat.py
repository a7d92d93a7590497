"""Schedules under a real beat and a real worker: every-minute starts, a closed window, an
overlap and a start that slipped too far, each decision found in the database.

mock:// endpoints keep the runs short; the beat, the worker and the decisions are real.
"""

from __future__ import annotations

import itertools
import json
import time
from datetime import datetime, timedelta

import pytest
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from campaigns import runs
from campaigns.choices import ACTIVE_RUN_STATES, RunState
from campaigns.models import WEEKDAYS, CampaignSchedule, Run
from campaigns.runs import scheduling
from collectors.models import Event
from tests.support.factories import backend, endpoint, mock_campaign
from tests.support.workers import celery_beat, celery_worker

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def every_minute(campaign, **fields) -> CampaignSchedule:
    return scheduling.save_schedule(CampaignSchedule(campaign=campaign, kind="cron", cron="* * * * *", **fields))


def own_backend(campaign, name: str = ""):
    """Move a campaign's endpoints to a backend of its own, so only the overlaps meant happen."""
    for ep in (*campaign.sources.all(), *campaign.destinations.all()):
        ep.backend = backend(name or f"{campaign.name}-backend")
        ep.save()
    return campaign


def skip_events(campaign) -> list[Event]:
    prefix = f"Scheduled start of {campaign.name} skipped"
    return list(Event.objects.filter(kind="schedule", summary__startswith=prefix))


def wait_until(check, timeout: float, *processes) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        for p in processes:
            assert p.returncode is None, p.log_text()[-3000:]
        time.sleep(1)
    raise AssertionError("\n".join(p.log_text()[-3000:] for p in processes))


def test_beat_starts_runs_every_minute_and_records_every_skip(log_dir):
    # Runs every minute.
    regular = own_backend(mock_campaign("regular", file_count=5, concurrency_steps=[5]))
    every_minute(regular)
    # Allowed only tomorrow: every start today is skipped.
    tomorrow = WEEKDAYS[(timezone.now().weekday() + 1) % 7]
    closed = own_backend(mock_campaign("closed", file_count=1))
    every_minute(closed, window_days=tomorrow, time_zone="UTC")
    # A long run holds backend "shared"; another campaign writing there must wait its turn.
    hog = own_backend(mock_campaign("hog", dst_query="time=600", file_count=1, cancel_grace=0), "shared")
    polite = own_backend(mock_campaign("polite", file_count=1))
    polite.destinations.set([endpoint("polite-dst2", "mock://polite2.test/data/?time=0", backend_name="shared")])
    every_minute(polite)
    # Beat was down for an hour: the overdue start is sent at once, and is too late.
    late = own_backend(mock_campaign("late", file_count=1))
    late_schedule = every_minute(late, max_slip_minutes=5)
    PeriodicTask.objects.filter(pk=late_schedule.periodic_task_id).update(
        last_run_at=timezone.now() - timedelta(hours=1)
    )

    worker = celery_worker(log_dir, concurrency=3)
    beat = hog_run = None
    try:
        worker.wait_for_log("ready.", timeout=60)
        hog_run = runs.start_run(hog, trigger="command")
        wait_until(lambda: Run.objects.get(pk=hog_run.pk).state == RunState.RUNNING, 60, worker)
        beat = celery_beat(log_dir)

        def enough() -> bool:
            done = Run.objects.filter(campaign=regular, trigger="schedule", state=RunState.SUCCEEDED).count()
            return done >= 2 and skip_events(closed) and skip_events(polite) and skip_events(late)

        wait_until(enough, 200, worker, beat)
    finally:
        if beat is not None:
            beat.stop()
        if hog_run is not None:
            runs.request_cancel(Run.objects.get(pk=hog_run.pk))
        try:
            wait_until(lambda: not Run.objects.filter(state__in=ACTIVE_RUN_STATES, campaign=hog).exists(), 30)
        finally:
            worker.stop()

    # Every minute: each start was due on a minute boundary and they came a minute apart.
    started = Event.objects.filter(kind="schedule", run_id__in=regular.runs.values("pk")).order_by("time")
    due = [datetime.fromisoformat(json.loads(e.detail)["due_at"]) for e in started]
    assert len(due) >= 2 and all(d.second == 0 for d in due), due
    assert all((b - a) == timedelta(minutes=1) for a, b in itertools.pairwise(due)), due
    assert all(r.trigger == "schedule" for r in Run.objects.filter(campaign=regular))

    assert "outside the allowed days" in skip_events(closed)[0].summary
    assert not Run.objects.filter(campaign=closed).exists()

    reason = skip_events(polite)[0].summary
    assert f"overlap: run #{hog_run.pk} (running) is writing to backend shared" in reason, reason
    assert not Run.objects.filter(campaign=polite).exists()

    slipped = json.loads(skip_events(late)[0].detail)
    assert "min after its due time" in slipped["reason"] and "(max slip 5 min)" in slipped["reason"]
    assert datetime.fromisoformat(slipped["decided_at"]) - datetime.fromisoformat(slipped["due_at"]) > timedelta(
        minutes=55
    )

"""Retention: old transfers and samples go in batches; summaries, steps, comparisons and events stay."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import F
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from campaigns import runs
from campaigns.choices import RunState
from campaigns.models import Run, RunStep, Transfer
from campaigns.results import comparison
from campaigns.results.retention import apply_retention
from campaigns.runs.lifecycle import RunDriver
from collectors.models import Event, Host, MetricRollup, MetricSample
from tests.support.factories import mock_campaign

pytestmark = pytest.mark.django_db(transaction=True)
LATER = timedelta(days=400)  # retention runs "400 days from now": every run and sample is old


def finished_run(name: str, host: Host, *, files: int = 20) -> Run:
    campaign = mock_campaign(name, file_count=files, concurrency_steps=[2, 4], step_files=files // 2)
    for ep in campaign.destinations.all():
        ep.hosts.add(host)
    run = runs.create_run(campaign, trigger="command")
    assert RunDriver(run.pk).drive() == RunState.SUCCEEDED
    run.refresh_from_db()
    # Give the run a ten-minute window with the door's CPU sampled every 30 s inside it.
    start = run.finished_at - timedelta(minutes=10)
    Run.objects.filter(pk=run.pk).update(started_at=start)
    MetricSample.objects.bulk_create(
        MetricSample(host=host, metric="cpu.percent", time=start + timedelta(seconds=30 * i), value=10 + (i * 7) % 13)
        for i in range(20)
    )
    return Run.objects.get(pk=run.pk)


def steps(run: Run) -> list[tuple]:
    return list(RunStep.objects.filter(run=run).values_list("index", "concurrency", "started_at", "ended_at"))


def test_retention_keeps_summaries_steps_comparisons_and_events():
    host = Host.objects.create(name="door-a")
    first, second = finished_run("old-a", host), finished_run("old-b", host)
    fresh = MetricSample.objects.create(host=host, metric="cpu.percent", time=timezone.now() + LATER, value=1.0)
    before_compare = comparison.compare([first, second])
    assert all(row["door_cpu_percent"]["door-a"] for row in before_compare["runs"])  # samples were read
    before = {r.pk: (dict(r.summary), steps(r)) for r in (first, second)}
    events_before = list(Event.objects.order_by("pk").values_list("pk", "kind", "summary", "run_id"))
    raw = list(MetricSample.objects.exclude(pk=fresh.pk).values_list("time", "value"))

    with CaptureQueriesContext(connection) as queries:
        report = apply_retention(timezone.now() + LATER, transfer_days=365, sample_days=30, batch=7)

    assert report["runs_frozen"] == 2
    assert report["transfers_deleted"] == 40 and not Transfer.objects.exists()
    deletes = [q["sql"] for q in queries.captured_queries if q["sql"].startswith('DELETE FROM "campaigns_transfer"')]
    assert len(deletes) == 2 * 3  # 20 rows a run, in batches of 7
    assert report["samples_deleted"] == len(raw) == 40
    assert list(MetricSample.objects.values_list("pk", flat=True)) == [fresh.pk]

    # What the runs show and how they compare is what it was.
    for run in Run.objects.filter(pk__in=[first.pk, second.pk]):
        summary, run_steps = before[run.pk]
        kept = {k: v for k, v in run.summary.items() if k not in ("archived", "door_cpu_percent", "series_60s")}
        assert kept == summary
        assert steps(run) == run_steps
        assert run.summary["archived"]["transfers_deleted"] == 20
        assert run.summary["series_60s"], "the throughput series is frozen before the transfers go"
    after_compare = comparison.compare(list(Run.objects.filter(pk__in=[first.pk, second.pk]).order_by("pk")))
    assert after_compare == before_compare
    assert list(Event.objects.order_by("pk").values_list("pk", "kind", "summary", "run_id")) == events_before

    # The samples live on as roll-ups that add up to them.
    rollups = list(MetricRollup.objects.all())
    assert sum(r.count for r in rollups) == 40
    assert sum(r.mean * r.count for r in rollups) == pytest.approx(sum(v for _, v in raw))
    assert min(r.minimum for r in rollups) == min(v for _, v in raw)
    assert max(r.maximum for r in rollups) == max(v for _, v in raw)
    assert all(r.seconds == 300 and r.time.timestamp() % 300 == 0 for r in rollups)

    # A second pass finds nothing more to do.
    again = apply_retention(timezone.now() + LATER, transfer_days=365, sample_days=30, batch=7)
    assert again == {"runs_frozen": 0, "transfers_deleted": 0, "samples_deleted": 0, "rollups_written": 0}


def test_runs_in_flight_and_young_data_are_not_touched():
    host, live_host = Host.objects.create(name="door-b"), Host.objects.create(name="door-live")
    done = finished_run("done", host, files=8)
    MetricSample.objects.filter(host=host).update(time=F("time") - timedelta(hours=1))
    live = finished_run("live", live_host, files=8)
    Run.objects.filter(pk=live.pk).update(state=RunState.RUNNING, created=live.started_at)
    # Nothing is old enough yet.
    assert apply_retention(transfer_days=365, sample_days=30)["transfers_deleted"] == 0
    assert Transfer.objects.filter(run=done).count() == 8
    # Later: the finished run's transfers and samples go; the live run's transfers stay, and
    # so do the samples of its window.
    report = apply_retention(timezone.now() + LATER, transfer_days=365, sample_days=30)
    assert report["transfers_deleted"] == 8
    assert Transfer.objects.filter(run=live).count() == 8
    assert report["samples_deleted"] == 20
    assert not MetricSample.objects.filter(host=host).exists()
    assert MetricSample.objects.filter(host=live_host).count() == 20
    assert "archived" not in Run.objects.get(pk=live.pk).summary


def test_zero_days_keeps_everything():
    host = Host.objects.create(name="door-c")
    finished_run("keep", host, files=8)
    report = apply_retention(timezone.now() + LATER, transfer_days=0, sample_days=0)
    assert report == {"runs_frozen": 0, "transfers_deleted": 0, "samples_deleted": 0, "rollups_written": 0}
    assert Transfer.objects.count() == 8 and MetricSample.objects.count() == 20

"""Readers choose once between a run's stored results and figures computed from its rows:
a finished run reads the same after retention deleted its rows; a live one is computed."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from campaigns import runs
from campaigns.choices import RunState
from campaigns.models import Run, Transfer
from campaigns.results import analysis, comparison, readers
from campaigns.results.finalize import finalize
from campaigns.results.retention import apply_retention
from collectors.models import Host, MetricSample
from tests.support.factories import mock_campaign
from tests.support.runs import T0, drive, running_run


@pytest.mark.django_db(transaction=True)
def test_a_finished_run_reads_the_same_after_retention_deleted_its_rows(client, viewer):
    door = Host.objects.create(name="door-r")
    campaign = mock_campaign("kept", dst_query="time=0.01", file_count=20, concurrency_steps=[1, 4], step_files=10)
    campaign.destinations.get().hosts.add(door)
    run = drive(campaign)
    MetricSample.objects.bulk_create(
        MetricSample(host=door, metric="cpu.percent", time=run.started_at + (run.finished_at - run.started_at) / 2,
                     value=v)
        for v in (20.0, 40.0)
    )  # fmt: skip
    client.force_login(viewer)

    def shown(run: Run) -> dict:
        return {
            "steps": readers.steps(run),
            "timeline": readers.timeline(run),
            "door_cpu": readers.door_cpu(run),
            "verdict": readers.verdict(run),
            "compare": comparison.compare([run]),
            "steps_json": client.get(f"/campaigns/runs/{run.pk}/charts/steps.json").json(),
            "steps_csv": client.get(f"/api/v1/runs/{run.pk}/steps-csv/").getvalue(),
        }

    before = shown(run)
    assert before["door_cpu"] == {"door-r": pytest.approx(30.0)}
    assert [s["concurrency"] for s in before["steps"]] == [1, 4]
    page_before = client.get(f"/campaigns/runs/{run.pk}/").content.decode()

    apply_retention(timezone.now() + timedelta(days=400), transfer_days=365, sample_days=30)
    assert not Transfer.objects.filter(run=run).exists() and not MetricSample.objects.exists()
    after_run = Run.objects.get(pk=run.pk)
    # Computed now, the figures would be gone: the readers read what was stored.
    assert analysis.run_summary(after_run)["steps"] == []
    assert shown(after_run) == before
    page_after = client.get(f"/campaigns/runs/{run.pk}/").content.decode()
    table = page_before[page_before.index('id="result"') : page_before.index('id="transfers"')]
    assert table in page_after  # the step and door tables, figure for figure


@pytest.mark.django_db
def test_a_live_run_is_computed_from_its_rows_and_read_as_stored_once_finished():
    run = running_run("live-r")
    assert readers.stored(run) is None
    live = readers.steps(run)
    reference = analysis.run_summary(run)["steps"]
    assert [(s["step"], s["concurrency"], s["files_ok"], s["files_failed"]) for s in live] == [
        (r["step"], r["concurrency"], r["files_ok"], r["files_failed"]) for r in reference
    ]
    for mine, theirs in zip(live, reference, strict=True):
        assert mine["throughput_bps"] == pytest.approx(theirs["throughput_bps"])  # the one formula
    assert readers.verdict(run)["knee"]["concurrency"] == 2
    row = comparison.compare([run])["runs"][0]
    assert row["files_ok"] == 4 and row["throughput_bps"] == pytest.approx(4e6 / 15)

    finalize(run, state=RunState.SUCCEEDED, reason="", now=T0 + timedelta(seconds=20))
    assert readers.stored(run) is run.summary
    assert readers.steps(run) == run.summary["steps"] and readers.steps(run)[0]["duration_p50"] == 4
    assert readers.verdict(run) == run.summary["verdict"]
    assert readers.verdict(run, recompute=True)["computed_at"] != run.summary["verdict"]["computed_at"]


@pytest.mark.django_db
def test_the_run_page_tells_the_campaigns_byte_budget_from_the_one_the_run_got(client, viewer):
    campaign = mock_campaign("budget-page", file_count=10, file_size=1000, max_bytes=9000, max_bytes_per_day=3500)
    run = runs.create_run(campaign, trigger="command")
    assert readers.byte_budget(run) == {"campaign": 9000, "run": 3500, "label": "daily byte budget", "cut": True}
    client.force_login(viewer)
    html = client.get(f"/campaigns/runs/{run.pk}/").content.decode()
    frozen = html[html.index('id="frozen-parameters"') :]
    assert "the campaign's byte budget per run</dt><dd><code>9000</code>" in frozen
    assert "Byte budget this run got</dt><dd><code>3500</code> — what was left of the daily byte budget" in frozen
    assert "<dt>max_bytes</dt>" not in frozen
    plain = runs.create_run(mock_campaign("budget-plain", max_bytes=5000), trigger="command")
    assert readers.byte_budget(plain) == {"campaign": 5000, "run": 5000, "label": "byte budget", "cut": False}


@pytest.mark.django_db
def test_a_live_runs_charts_summary_and_trimmed_figures_never_read_its_rows(client, viewer):
    """What a live run's page polls, its verdict and a trimmed comparison read its time buckets:
    no statement touches the transfer table (the progress partial's copies in flight aside)."""
    run = running_run("live-buckets")
    client.force_login(viewer)
    with CaptureQueriesContext(connection) as captured:
        for name in ("timeline", "steps", "errors"):
            assert client.get(f"/campaigns/runs/{run.pk}/charts/{name}.json").status_code == 200
        readers.verdict(run)
        trimmed = comparison.trimmed_summary(run, comparison.Trim(warmup_seconds=5, event_margin_seconds=30))
    read = [q["sql"] for q in captured if '"campaigns_transfer"' in q["sql"] or "campaigns_transfer " in q["sql"]]
    assert not read, read
    # Still live months after its start, the run spans more than 6 hours: its trim is cut on
    # the 60 s buckets, so a 5 s warm-up takes the whole first minute, where all its copies ended.
    assert trimmed["left_out"]["bucket_seconds"] == 60
    assert (trimmed["total"]["files_ok"], trimmed["left_out"]["transfers"]) == (0, 5)

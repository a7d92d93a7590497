"""A finished run's results are written once, with its final state, and later sections
(clean-up, retention) are added to them without losing one another."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext

from campaigns import runs
from campaigns.choices import RunState
from campaigns.models import Run, RunChart, RunStep, Transfer
from campaigns.results import charts, retention
from campaigns.results.finalize import add, finalize
from campaigns.runs import cleanup
from tests.support.factories import mock_campaign

T0 = datetime(2026, 2, 1, 9, 0, 0, tzinfo=UTC)


def running_run(name: str = "fin") -> Run:
    """A run in flight with two steps (concurrency 1 then 2) and five copies, one failed."""
    campaign = mock_campaign(name, file_count=5, concurrency_steps=[1, 2], step_seconds=10, tpc_mode="pull")
    run = runs.create_run(campaign, trigger="command")
    Run.objects.filter(pk=run.pk).update(state=RunState.RUNNING, started_at=T0, active_transfers=3, eta_seconds=9)
    RunStep.objects.create(run=run, index=0, concurrency=1, started_at=T0, ended_at=T0 + timedelta(seconds=10))
    RunStep.objects.create(run=run, index=1, concurrency=2, started_at=T0 + timedelta(seconds=10))
    src, dst = campaign.sources.get(), campaign.destinations.get()
    folder = cleanup.run_folders(run)[dst.pk]
    for index, (step, start, seconds, state) in enumerate(
        [(0, 0, 4, "succeeded"), (0, 4, 6, "succeeded"), (1, 10, 4, "succeeded"), (1, 11, 4, "succeeded"),
         (1, 12, 1, "failed")]
    ):  # fmt: skip
        Transfer.objects.create(
            run=run, index=index, step=step, source=f"mock://src.test/{index}", destination=f"{folder}f{index:07d}",
            source_endpoint=src, destination_endpoint=dst, size=1_000_000, state=state, attempt=1,
            started_at=T0 + timedelta(seconds=start), finished_at=T0 + timedelta(seconds=start + seconds),
            duration=seconds, bytes_transferred=1_000_000 if state == "succeeded" else 0,
            error_category="" if state == "succeeded" else "checksum_timeout",
        )  # fmt: skip
    return Run.objects.get(pk=run.pk)


@pytest.mark.django_db
def test_finalize_writes_state_and_results_in_one_update_then_the_timeline():
    run = running_run()
    now = T0 + timedelta(seconds=20)
    with CaptureQueriesContext(connection) as queries:
        finalize(run, state=RunState.SUCCEEDED, reason="x" * 300, now=now, extras={"fts": {"jobs": ["j1"]}})
    updates = [q["sql"] for q in queries.captured_queries if q["sql"].startswith('UPDATE "campaigns_run"')]
    assert len(updates) == 1, updates
    assert "summary" in updates[0] and "state" in updates[0]

    stored = Run.objects.get(pk=run.pk)
    assert stored.state == RunState.SUCCEEDED and stored.finished_at == now and stored.heartbeat_at == now
    assert stored.stop_reason == "x" * 200
    assert stored.active_transfers == 0 and stored.eta_seconds is None
    summary = stored.summary
    assert [(s["step"], s["concurrency"], s["files_ok"]) for s in summary["steps"]] == [(0, 1, 2), (1, 2, 2)]
    assert summary["steps"][0]["throughput_bps"] == pytest.approx(2e6 / 10)
    assert summary["door_side"] == "destination" and list(summary["doors"]) == ["dst.test"]
    assert summary["total"]["files_failed"] == 1
    assert summary["verdict"]["status"] == "still_rising" and summary["verdict"]["knee"]["concurrency"] == 2
    assert summary["recorded_at"] == now.isoformat() and summary["summary_seconds"] >= 0
    assert summary["fts"] == {"jobs": ["j1"]}  # the engine's extra, under its own key
    assert "disturbance" not in summary
    # The caller's instance is the run as written, and the chart is the finished run's.
    assert run.state == stored.state and run.summary == summary
    assert RunChart.objects.get(run=run).data == charts.compute_timeline(stored)


@pytest.mark.django_db
def test_an_extra_may_not_replace_a_computed_section():
    run = running_run()
    with pytest.raises(ValueError, match="steps"):
        finalize(run, state=RunState.SUCCEEDED, reason="", now=T0 + timedelta(seconds=20), extras={"steps": []})
    assert Run.objects.get(pk=run.pk).state == RunState.RUNNING  # nothing written


@pytest.mark.django_db
def test_add_sets_one_section_and_keeps_the_others():
    run = running_run()
    finalize(run, state=RunState.SUCCEEDED, reason="", now=T0 + timedelta(seconds=20))
    stale = Run.objects.get(pk=run.pk)
    add(run, "cleanup", {"deleted": 5})
    add(stale, "archived", {"transfers_deleted": 0})  # `stale` never saw the clean-up
    summary = Run.objects.get(pk=run.pk).summary
    assert summary["cleanup"] == {"deleted": 5} and summary["archived"] == {"transfers_deleted": 0}
    assert summary["steps"] == run.summary["steps"]
    assert stale.summary == summary
    with pytest.raises(ValueError, match="verdict"):
        add(run, "verdict", {})


@pytest.mark.django_db(transaction=True)
def test_an_add_waits_for_a_concurrent_writer_and_keeps_its_section():
    run = running_run()
    finalize(run, state=RunState.SUCCEEDED, reason="", now=T0 + timedelta(seconds=20))

    def other_add() -> None:
        try:
            add(Run.objects.get(pk=run.pk), "cleanup", {"deleted": 5})
        finally:
            connections.close_all()

    pool = ThreadPoolExecutor(max_workers=1)
    with transaction.atomic():
        # Hold the row as a concurrent add does between its read and its write.
        current = Run.objects.select_for_update().get(pk=run.pk).summary
        other = pool.submit(other_add)
        time.sleep(0.5)
        assert not other.done(), "the second add did not wait for the row"
        Run.objects.filter(pk=run.pk).update(summary={**current, "archived": {"transfers_deleted": 3}})
    other.result(timeout=10)
    pool.shutdown()
    summary = Run.objects.get(pk=run.pk).summary
    assert summary["archived"] == {"transfers_deleted": 3} and summary["cleanup"] == {"deleted": 5}


class _Engine:
    def __init__(self) -> None:
        self.removed: list[str] = []

    def remove(self, url: str) -> None:
        self.removed.append(url)

    def remove_folder(self, url: str) -> None:
        pass


@pytest.mark.django_db
def test_cleanup_and_retention_add_to_the_results_without_losing_each_other():
    run = running_run()
    finalize(run, state=RunState.SUCCEEDED, reason="", now=T0 + timedelta(seconds=20))
    for_cleanup, for_retention = Run.objects.get(pk=run.pk), Run.objects.get(pk=run.pk)
    engine = _Engine()
    report = cleanup.cleanup_run(for_cleanup, engine)
    assert report["deleted"] == 5 and report["refused"] == 0
    retention.freeze(for_retention, T0 + timedelta(days=400))  # its copy never saw the clean-up
    retention.delete_transfers(for_retention, batch=2)
    summary = Run.objects.get(pk=run.pk).summary
    assert summary["cleanup"]["deleted"] == 5
    assert summary["archived"]["transfers_deleted"] == 5
    assert "door_cpu_percent" in summary and "series_60s" in summary
    assert summary["steps"] == run.summary["steps"] and summary["verdict"] == run.summary["verdict"]

"""A finished run's results are written once, with its final state, and later sections
(clean-up, retention) are added to them without losing one another."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext

from campaigns.choices import RunState
from campaigns.models import Run, RunChart
from campaigns.results import charts, retention
from campaigns.results.finalize import add, finalize
from campaigns.runs import cleanup
from tests.support.runs import T0, running_run


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

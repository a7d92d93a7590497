"""The run driver on gfal2's mock plugin: the real gfal2 code path, simulated storage."""

from __future__ import annotations

import itertools
import threading
import time
from datetime import datetime, timedelta

import pytest
from django.conf import settings

from campaigns import runs
from campaigns.choices import RunState
from campaigns.models import Run, Transfer
from campaigns.runs.lifecycle import RunDriver
from campaigns.runs.loop import CONTROL_SECONDS
from collectors.models import Event
from tests.support.factories import mock_campaign
from tests.support.runs import drive

pytestmark = pytest.mark.django_db(transaction=True)
POLL = 0.25  # seconds between the live-progress test's looks at the run


def final_states(run: Run) -> dict[str, int]:
    counts: dict[str, int] = {}
    for state in Transfer.objects.filter(run=run).values_list("state", flat=True):
        counts[state] = counts.get(state, 0) + 1
    return counts


def test_fixed_concurrency_records_every_transfer_once():
    run = drive(mock_campaign(file_count=500, concurrency_steps=[8]))
    assert run.state == RunState.SUCCEEDED
    assert run.stop_reason == "all planned transfers finished"
    assert (run.files_done, run.files_failed, run.files_skipped) == (500, 0, 0)
    assert final_states(run) == {"succeeded": 500}
    assert run.bytes_done == 500 * 1000
    assert sorted(Transfer.objects.filter(run=run).values_list("index", flat=True)) == list(range(500))
    assert run.summary["total"]["files_ok"] == 500
    assert run.summary["total"]["success_rate"] == 1.0
    assert Event.objects.filter(run_id=run.pk, kind="run_start").count() == 1
    assert Event.objects.filter(run_id=run.pk, kind="run_end").count() == 1


def test_sweep_gives_one_aggregate_per_step_at_its_concurrency():
    run = drive(mock_campaign(file_count=300, concurrency_steps=[1, 2, 4], step_files=100))
    steps = run.summary["steps"]
    assert [s["concurrency"] for s in steps] == [1, 2, 4]
    assert [s["files_ok"] for s in steps] == [100, 100, 100]
    assert all(s["throughput_bps"] and s["throughput_bps"] > 0 for s in steps)
    assert list(run.steps.values_list("concurrency", flat=True)) == [1, 2, 4]
    # Never more copies in flight than the step allows: at concurrency 1, copies never overlap.
    first = list(
        Transfer.objects.filter(run=run, step=0).order_by("started_at").values_list("started_at", "finished_at")
    )
    assert all(first[i][1] <= first[i + 1][0] for i in range(len(first) - 1))


def test_time_bounded_steps_then_the_sweep_ends():
    run = drive(mock_campaign(file_count=100, dst_query="time=1", concurrency_steps=[2, 4], step_seconds=2))
    assert run.stop_reason == "concurrency sweep completed"
    assert [s["concurrency"] for s in run.summary["steps"]] == [2, 4]
    assert run.files_skipped == 100 - run.files_done
    # The sweep ran every step to its end: the files of the pool no step reached were not needed
    # (tests/campaigns/runs/test_time_bounded_sweeps.py).
    assert run.files_skipped > 0 and run.state == RunState.SUCCEEDED
    assert final_states(run).get("queued") is None and final_states(run).get("active") is None


@pytest.mark.parametrize(
    ("errno", "category"),
    [
        (110, "transfer_timeout"),
        (111, "connection_refused"),
        (28, "no_space"),
        (13, "permission_denied"),
        (2, "not_found"),
        (17, "file_exists"),
    ],
)
def test_failures_are_categorised_with_the_raw_message(errno, category):
    run = drive(mock_campaign(file_count=3, dst_query=f"time=1&transfer_errno={errno}"))
    assert run.files_failed == 3
    assert run.state == RunState.FAILED
    transfer = Transfer.objects.filter(run=run).first()
    assert transfer.error_category == category
    assert transfer.error_code == errno
    assert transfer.error_message
    assert run.summary["total"]["errors"] == {category: 3}


def test_checksum_mismatch_is_its_own_category():
    run = drive(
        mock_campaign(
            file_count=2, src_query="checksum=0000aaaa", dst_query="time=0&checksum=0000bbbb", checksum_mode="both"
        )
    )
    assert set(Transfer.objects.filter(run=run).values_list("error_category", flat=True)) == {"checksum_mismatch"}


def test_retries_are_counted_and_the_last_error_kept():
    run = drive(mock_campaign(file_count=2, dst_query="time=1&transfer_errno=110", retries=2))
    assert set(Transfer.objects.filter(run=run).values_list("attempt", "state")) == {(3, "failed")}
    assert run.files_failed == 2


def test_byte_budget_stops_cleanly():
    run = drive(mock_campaign(file_count=1000, file_size=1000, max_bytes=100_000, concurrency_steps=[4]))
    assert run.state == RunState.PARTIAL  # ~900 planned transfers left untried by the budget
    assert run.stop_reason.startswith("byte budget reached")
    assert 100_000 <= run.bytes_done <= 101_000
    assert run.files_done + run.files_skipped == 1000
    assert final_states(run)["skipped"] == run.files_skipped


def test_cancel_aborts_in_flight_copies_after_the_grace_time():
    campaign = mock_campaign(file_count=50, dst_query="time=30", concurrency_steps=[5], cancel_grace=1)
    run = runs.create_run(campaign, trigger="command")
    result: list[str] = []
    thread = threading.Thread(target=lambda: result.append(RunDriver(run.pk).drive()))
    thread.start()
    deadline = time.monotonic() + 20
    while Run.objects.get(pk=run.pk).active_transfers < 5 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert runs.request_cancel(Run.objects.get(pk=run.pk))
    thread.join(timeout=30)
    assert not thread.is_alive()
    run.refresh_from_db()
    assert run.state == RunState.CANCELLED
    states = final_states(run)
    # The five copies under way are cancelled, with the time they ran; the 45 never started are skipped.
    assert (states.get("cancelled"), states.get("skipped")) == (5, 45), states
    assert (run.files_cancelled, run.files_skipped) == (5, 45)
    aborted = Transfer.objects.filter(run=run, attempt=1)
    assert aborted.count() == 5 and all(t.error_category == "cancelled" and t.state == "cancelled" for t in aborted)
    # The time each ran (gfal2's own clock for a copy it gave back: within a blink of the record's).
    assert all(
        t.duration > 0 and abs(t.duration - (t.finished_at - t.started_at).total_seconds()) < 0.5 for t in aborted
    )
    assert not Transfer.objects.filter(run=run, state="skipped", started_at__isnull=False).exists()
    # Measured against the copies themselves, not against a wall-clock budget a busy machine
    # may overrun: the run ended before the first aborted copy would have finished on its own.
    would_finish = min(t.started_at for t in aborted) + timedelta(seconds=30)
    assert run.finished_at < would_finish, "cancel must not wait for 30 s copies"
    assert all(t.finished_at < would_finish for t in aborted)


def test_a_second_driver_does_not_steal_a_live_run():
    campaign = mock_campaign(file_count=20, dst_query="time=1", concurrency_steps=[2])
    run = runs.create_run(campaign, trigger="command")
    assert runs.acquire_lease(run.pk, "someone-else")
    assert RunDriver(run.pk).drive() == "busy"
    run.refresh_from_db()
    assert run.state == RunState.PENDING and run.executor == "someone-else"


def test_a_driver_whose_clock_is_an_hour_off_keeps_its_run_and_loses_it_only_when_silent(monkeypatch, settings):
    """Leases live on the database's clock: a worker whose own clock runs an hour behind (a
    stepped clock, a host without NTP) still holds its run while it beats, and one an hour ahead
    cannot keep a silent driver's run from the others."""
    from django.utils import timezone

    campaign = mock_campaign(file_count=20, dst_query="time=1", concurrency_steps=[2])
    run = runs.create_run(campaign, trigger="command")
    real_now = timezone.now
    monkeypatch.setattr(timezone, "now", lambda: real_now() - timedelta(hours=1))
    assert runs.acquire_lease(run.pk, "behind") and runs.renew_lease(run.pk, "behind")
    monkeypatch.setattr(timezone, "now", lambda: real_now() + timedelta(hours=1))
    assert runs.stale_run_ids() == [] and not runs.acquire_lease(run.pk, "ahead")
    # Silent for longer than the lease, by the database's clock: free, whatever the clocks say.
    silent = timedelta(seconds=settings.STORAGEOPS_RUN_LEASE_SECONDS + 5)
    Run.objects.filter(pk=run.pk).update(heartbeat_at=real_now() - silent)
    monkeypatch.setattr(timezone, "now", lambda: real_now() - timedelta(hours=1))
    assert runs.stale_run_ids() == [run.pk] and runs.acquire_lease(run.pk, "rescuer")
    assert not runs.renew_lease(run.pk, "behind")


def test_a_run_is_resumed_from_its_rows_after_its_driver_vanished(settings):
    """A driver that died mid-run leaves active rows; the next driver retries exactly those."""
    campaign = mock_campaign(file_count=40, concurrency_steps=[4])
    run = runs.create_run(campaign, trigger="command")
    # Drive a first time but stop after planning, as if the worker was killed right there.
    first = RunDriver(run.pk, lease_holder="dead-worker")
    first.copier = first.copier_factory(run.snapshot)
    assert runs.acquire_lease(run.pk, "dead-worker")
    first._prepare(Run.objects.get(pk=run.pk))
    from campaigns.runs import store as transfer_store

    jobs = transfer_store.claim(run.pk, 4, 0, "dead-worker")
    assert len(jobs) == 4
    # The dead driver had seen two of them start copying: those lost attempts stay on their record.
    started = time.time() - 3
    assert transfer_store.mark_started(run.pk, "dead-worker", [(jobs[0].id, started), (jobs[1].id, started)]) == 2
    assert transfer_store.mark_started(run.pk, "someone-else", [(jobs[2].id, started)]) == 0
    Run.objects.filter(pk=run.pk).update(heartbeat_at=run.created - timedelta(hours=1))  # lease long expired
    assert runs.stale_run_ids() == [run.pk]
    assert RunDriver(run.pk).drive() == RunState.SUCCEEDED
    run.refresh_from_db()
    assert (run.files_done, run.files_failed, run.files_skipped) == (40, 0, 0)
    retried = Transfer.objects.filter(run=run, attempt=2)
    assert sorted(retried.values_list("index", flat=True)) == [j.index for j in jobs]
    lost = {t.index: t.history for t in retried}
    for job in jobs[:2]:
        assert [(h["attempt"], h["category"]) for h in lost[job.index]] == [(1, "driver_lost")]
        assert abs(datetime.fromisoformat(lost[job.index][0]["started_at"]).timestamp() - started) < 0.01
    assert lost[jobs[2].index] == lost[jobs[3].index] == []  # never seen copying: nothing to say
    assert all(t.started_at.timestamp() > started for t in retried)  # the new attempt's own start


def test_live_progress_is_persisted_every_two_seconds():
    campaign = mock_campaign("live", file_count=60, dst_query="time=1", concurrency_steps=[10])
    run = runs.create_run(campaign, trigger="command")
    thread = threading.Thread(target=RunDriver(run.pk).drive)
    thread.start()
    seen, polls = [], []
    try:
        deadline = time.monotonic() + 30
        while thread.is_alive() and time.monotonic() < deadline:
            polls.append(time.monotonic())
            live = Run.objects.get(pk=run.pk)
            if live.state == RunState.RUNNING and live.progress_at:
                seen.append((time.monotonic(), live.progress_at, live))
            time.sleep(POLL)
    finally:
        thread.join(timeout=30)
    stamps = sorted({p for _, p, _ in seen})
    assert len(stamps) >= 2
    # The driver persists within CONTROL_SECONDS after every PROGRESS_SECONDS, plus whatever a
    # busy machine delays this process by; the observer's late polls measure that delay (and a
    # late poll is also how a stamp goes unseen), so the margin is measured, not assumed.
    delay = max(max(b - a for a, b in itertools.pairwise(polls)) - POLL, 0.0)
    bound = settings.STORAGEOPS_PROGRESS_SECONDS + CONTROL_SECONDS + delay + 0.1
    assert max((b - a).total_seconds() for a, b in itertools.pairwise(stamps)) <= bound, (stamps, delay)
    mid = [r for _, _, r in seen if 0 < r.files_done < 60]
    assert mid, "progress must be visible while the run is going"
    sample = mid[-1]
    assert any(r.throughput_bps and r.throughput_bps > 0 for r in mid)
    assert any(r.eta_seconds and r.eta_seconds > 0 for r in mid)
    assert sample.current_step == 0 and sample.current_concurrency == 10
    assert all(r.active_transfers <= 10 for r in mid)
    assert any(r.active_transfers > 0 for r in mid)

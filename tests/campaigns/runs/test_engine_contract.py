"""The run lifecycle's contract, held by every engine: the same cases run once through the gfal2
copy pool and once through FTS (the FTS double, which copies with real gfal2).

Both engines copy mock:// files here (the real gfal2 code path, no disk): what is under test
is the lifecycle around them, a sweep, a budget, a cancel, a crash, a lost lease and the
resume after it, and it must read the same whichever executor did the copies.
"""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest

from campaigns import runs
from campaigns.choices import RunState, TransferState
from campaigns.models import FtsInstance, FtsLinkLimit, Run, RunStep, Transfer
from campaigns.runs import loop
from campaigns.runs.lifecycle import RunDriver
from collectors.models import Event
from tests.support.factories import mock_campaign
from tests.support.fts_double import FtsDouble

pytestmark = pytest.mark.django_db(transaction=True)
TOKEN = "contract-token"
SIZE = 1_000_000
FINAL = {TransferState.SUCCEEDED, TransferState.FAILED, TransferState.SKIPPED, TransferState.CANCELLED}


@pytest.fixture(params=["gfal2", "fts"])
def engine(request):
    """Campaign fields that make a run go through one engine or the other."""
    if request.param == "gfal2":
        yield {}
        return
    double = FtsDouble(token=TOKEN, scheduler_interval=0.05).start()
    try:
        instance = FtsInstance.objects.create(
            name="contract-fts",
            url=double.url,
            bearer_token=TOKEN,
            files_per_job=4,
            manage_link_limits=True,
            poll_seconds=0.2,
        )
        yield {"engine": "fts", "fts_instance": instance}
    finally:
        double.stop()


def new_run(name: str, engine: dict, seconds: int = 0, **fields) -> Run:
    # gfal2's mock plugin sleeps whole seconds (time=0.5 copies at once).
    fields = {"checksum_mode": "none", "file_size": SIZE, **engine, **fields}
    return runs.create_run(mock_campaign(name, dst_query=f"time={seconds}", **fields), trigger="command")


def drive_in_thread(run_id: int, **kwargs) -> tuple[threading.Thread, list]:
    result: list = []
    thread = threading.Thread(target=lambda: result.append(RunDriver(run_id, **kwargs).drive()), daemon=True)
    thread.start()
    return thread, result


def wait_for(condition, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.1)


def assert_every_transfer_final(run: Run) -> None:
    run.refresh_from_db()
    states = Counter(Transfer.objects.filter(run=run).values_list("state", flat=True))
    assert set(states) <= FINAL, states
    assert run.files_done == states[TransferState.SUCCEEDED]
    assert run.files_failed == states[TransferState.FAILED]
    assert run.files_skipped == states[TransferState.SKIPPED] + states[TransferState.CANCELLED]
    assert sum(states.values()) == run.planned_files


def test_a_file_bounded_sweep_runs_every_step_with_its_own_files(engine):
    run = new_run("contract-sweep", engine, file_count=12, concurrency_steps=[1, 2, 4], step_files=4)
    assert RunDriver(run.pk).drive() == RunState.SUCCEEDED
    run.refresh_from_db()
    assert run.stop_reason == "concurrency sweep completed"
    assert [(s.index, s.concurrency) for s in RunStep.objects.filter(run=run).order_by("index")] == [
        (0, 1),
        (1, 2),
        (2, 4),
    ]
    per_step = Counter(Transfer.objects.filter(run=run).values_list("step", flat=True))
    assert per_step == {0: 4, 1: 4, 2: 4}
    assert (run.files_done, run.files_failed, run.files_skipped) == (12, 0, 0)
    assert [s["concurrency"] for s in run.summary["steps"]] == [1, 2, 4]
    assert_every_transfer_final(run)


def test_a_byte_budget_stops_the_run_at_most_one_file_over_and_names_the_budget(engine):
    run = new_run("contract-budget", engine, file_count=40, concurrency_steps=[2], max_bytes=5 * SIZE)
    # 34 or 35 planned transfers were never tried: partial, not succeeded.
    assert RunDriver(run.pk).drive() == RunState.PARTIAL
    run.refresh_from_db()
    assert run.stop_reason.startswith("byte budget reached")
    assert 5 * SIZE <= run.bytes_done <= 6 * SIZE
    assert run.files_skipped == 40 - run.files_done
    assert_every_transfer_final(run)


def test_a_cancel_stops_the_run_and_closes_every_transfer(engine):
    run = new_run("contract-cancel", engine, seconds=1, file_count=30, concurrency_steps=[2], cancel_grace=1)
    thread, result = drive_in_thread(run.pk)
    wait_for(lambda: Transfer.objects.filter(run=run, state=TransferState.SUCCEEDED).count() >= 2)
    assert runs.request_cancel(Run.objects.get(pk=run.pk))
    thread.join(90)
    assert not thread.is_alive() and result == [RunState.CANCELLED]
    run.refresh_from_db()
    assert run.state == RunState.CANCELLED and run.stop_reason == "cancelled"
    assert 2 <= run.files_done < 30 and run.files_skipped == 30 - run.files_done - run.files_failed
    assert_every_transfer_final(run)
    if engine:
        assert FtsLinkLimit.objects.get(run=run).restored_at is not None


def test_a_crash_fails_the_run_closes_its_transfers_and_undoes_engine_changes(engine, monkeypatch):
    def boom(step, spec):
        raise RuntimeError("boom at the step change")

    monkeypatch.setattr(loop.steps, "next_step", boom)
    run = new_run("contract-crash", engine, file_count=8, concurrency_steps=[2, 4], step_files=4)
    with pytest.raises(RuntimeError, match="boom"):
        RunDriver(run.pk).drive()
    run.refresh_from_db()
    assert run.state == RunState.FAILED and run.stop_reason == "driver error"
    assert "boom at the step change" in run.error
    assert Event.objects.filter(run_id=run.pk, kind="run_incident", summary__contains="the driver crashed").exists()
    assert not Transfer.objects.filter(run=run, state__in=[TransferState.QUEUED, TransferState.ACTIVE]).exists()
    if engine:
        assert FtsLinkLimit.objects.get(run=run).restored_at is not None


def test_a_driver_that_lost_its_lease_stops_and_the_next_one_finishes_every_transfer_once(engine, settings):
    settings.STORAGEOPS_PROGRESS_SECONDS = 0.2
    run = new_run("contract-lease", engine, seconds=1, file_count=24, concurrency_steps=[3])
    thread, result = drive_in_thread(run.pk, executor="first-driver")
    wait_for(lambda: Transfer.objects.filter(run=run, state=TransferState.SUCCEEDED).count() >= 3)
    # Another worker takes the run over (as after the first one's lease expired).
    Run.objects.filter(pk=run.pk).update(executor="second-driver")
    thread.join(30)
    assert not thread.is_alive() and result == ["lease lost"]
    assert RunDriver(run.pk, executor="second-driver").drive() == RunState.SUCCEEDED
    run.refresh_from_db()
    assert (run.files_done, run.files_failed, run.files_skipped) == (24, 0, 0)
    assert_every_transfer_final(run)
    # Every transfer was written by one driver as its final record: none twice, none lost.
    assert Transfer.objects.filter(run=run, state=TransferState.SUCCEEDED).count() == 24
    # What the run rode through is on its record, and it started once.
    incidents = list(Event.objects.filter(run_id=run.pk, kind="run_incident").values_list("summary", flat=True))
    assert any("first-driver lost its lease" in s for s in incidents), incidents
    assert any("resumed by driver second-driver" in s for s in incidents), incidents
    assert Event.objects.filter(run_id=run.pk, kind="run_start").count() == 1

"""The run lifecycle's contract, held by every registered engine: the same cases run through
gfal2 (over mock:// and over file://), through FTS (the FTS double, which copies with real
gfal2), and through the toy engine that only the test suite registers (tests/support/toy_engine.py):
an engine that passes them is one the lifecycle can drive.

What is under test is the lifecycle around the engine, a sweep, a budget, a cancel, a crash, a
lost lease and the resume after it, and it must read the same whichever executor did the copies.
A new engine gets its case in ENGINE_CASES; test_every_registered_engine_has_a_contract_case
fails until it has one.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import pytest

from campaigns import runs
from campaigns.choices import RunState, TransferState
from campaigns.models import Run, RunStep, Transfer, engine_registry
from campaigns.runs import loop
from campaigns.runs.engines.fts.models import FtsInstance, FtsLinkLimit
from campaigns.runs.lifecycle import RunDriver
from collectors.models import Event
from tests.support.factories import campaign, endpoint, mock_campaign
from tests.support.fts_double import FtsDouble
from tests.support.toy_engine import toy_engine_registered

pytestmark = pytest.mark.django_db(transaction=True)
TOKEN = "contract-token"
SIZE = 1_000_000
FINAL = {TransferState.SUCCEEDED, TransferState.FAILED, TransferState.SKIPPED, TransferState.CANCELLED}
# Each engine case: a registered engine and the storage its copies go to.
ENGINE_CASES = ("gfal2-mock", "gfal2-file", "fts", "toy", "xrootd")


@dataclass
class EngineCase:
    """How a contract case makes a run go through one engine."""

    engine: str
    fields: dict = field(default_factory=dict)
    storage: str = "mock"  # "mock": gfal2's mock:// plugin, paced by time=N; "file": local folders;
    # "root": two real XRootD doors (`doors`)
    tmp_path: object = None
    doors: list = field(default_factory=list)

    @property
    def changes_engine_side(self) -> bool:
        # FTS link limits are set per step and must be restored however the run ends.
        return self.engine == "fts"

    def needs_paced_copies(self) -> None:
        if self.storage == "file":
            pytest.skip("file:// copies cannot be slowed down: the case needs copies under way to stop")


@pytest.fixture(params=ENGINE_CASES)
def engine(request, tmp_path):
    """Campaign fields that make a run go through one engine or another."""
    if request.param in ("gfal2-mock", "gfal2-file"):
        yield EngineCase("gfal2", storage=request.param.removeprefix("gfal2-"), tmp_path=tmp_path)
    elif request.param == "toy":
        with toy_engine_registered():
            yield EngineCase("toy", {"engine": "toy"})
    elif request.param == "xrootd":
        # Streamed at 2 MB/s (XrdCl's rate limit), a file takes 0.5 s: copies under way to stop;
        # in 250 kB chunks, a cancel is seen within 0.125 s. Adler32 compared end to end.
        options = {"xrate": 2 * SIZE, "chunk_size": 256 << 10}
        fields = {"engine": "xrootd", "tpc_mode": "streamed", "checksum_mode": "both", "engine_options": options}
        yield EngineCase("xrootd", fields, storage="root", doors=request.getfixturevalue("xrootd_pair"))
    else:
        double = FtsDouble(optimizer_interval=1.0, token=TOKEN, scheduler_interval=0.05).start()
        try:
            instance = FtsInstance.objects.create(
                name="contract-fts",
                url=double.url,
                bearer_token=TOKEN,
                files_per_job=4,
                manage_link_limits=True,
                poll_seconds=0.2,
            )
            yield EngineCase("fts", {"engine": "fts", "engine_options": {"instance": instance.pk}})
        finally:
            double.stop()


def new_run(name: str, engine: EngineCase, seconds: int = 0, **fields) -> Run:
    # gfal2's mock plugin sleeps whole seconds (time=0.5 copies at once).
    fields = {"checksum_mode": "none", "file_size": SIZE, **engine.fields, **fields}
    if engine.storage == "root":
        src = endpoint(f"{name}-src", engine.doors[0].root_url_for(f"/data/{name}/src/"))
        dst = endpoint(f"{name}-dst", engine.doors[1].root_url_for(f"/data/{name}/dst/"))
        made = campaign(name, [src], [dst], create_sources=True, **fields)
    elif engine.storage == "file":
        (engine.tmp_path / "src").mkdir(exist_ok=True)
        (engine.tmp_path / "dst").mkdir(exist_ok=True)
        src = endpoint(f"{name}-src", f"file://{engine.tmp_path}/src/", backend_name="worker-local")
        dst = endpoint(f"{name}-dst", f"file://{engine.tmp_path}/dst/", backend_name="worker-local")
        made = campaign(name, [src], [dst], create_sources=True, **fields)
    else:
        made = mock_campaign(name, dst_query=f"time={seconds}", **fields)
    run = runs.create_run(made, trigger="command")
    assert run.snapshot["parameters"]["engine"] == engine.engine
    return run


def test_every_registered_engine_has_a_contract_case():
    with toy_engine_registered():
        names = {entry.name for entry in engine_registry.registered()}
    assert names == {case.partition("-")[0] for case in ENGINE_CASES}


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
    assert run.files_skipped == states[TransferState.SKIPPED]
    assert run.files_cancelled == states[TransferState.CANCELLED]
    # Skipped: never started; cancelled: stopped under way, with a start time.
    rows = Transfer.objects.filter(run=run)
    assert not rows.filter(state=TransferState.SKIPPED, started_at__isnull=False).exists()
    assert not rows.filter(state=TransferState.CANCELLED, started_at__isnull=True).exists()
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
    engine.needs_paced_copies()
    run = new_run("contract-cancel", engine, seconds=1, file_count=30, concurrency_steps=[2], cancel_grace=1)
    thread, result = drive_in_thread(run.pk)
    wait_for(lambda: Transfer.objects.filter(run=run, state=TransferState.SUCCEEDED).count() >= 2)
    assert runs.request_cancel(Run.objects.get(pk=run.pk))
    thread.join(90)
    assert not thread.is_alive() and result == [RunState.CANCELLED]
    run.refresh_from_db()
    assert run.state == RunState.CANCELLED and run.stop_reason == "cancelled"
    assert 2 <= run.files_done < 30
    assert run.files_skipped + run.files_cancelled == 30 - run.files_done - run.files_failed
    assert_every_transfer_final(run)
    if engine.changes_engine_side:
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
    if engine.changes_engine_side:
        assert FtsLinkLimit.objects.get(run=run).restored_at is not None


def test_a_driver_that_lost_its_lease_stops_and_the_next_one_finishes_every_transfer_once(engine, settings):
    engine.needs_paced_copies()
    settings.STORAGEOPS_PROGRESS_SECONDS = 0.2
    run = new_run("contract-lease", engine, seconds=1, file_count=24, concurrency_steps=[3])
    thread, result = drive_in_thread(run.pk, lease_holder="first-driver")
    wait_for(lambda: Transfer.objects.filter(run=run, state=TransferState.SUCCEEDED).count() >= 3)
    # Another worker takes the run over (as after the first one's lease expired).
    Run.objects.filter(pk=run.pk).update(executor="second-driver")
    thread.join(30)
    assert not thread.is_alive() and result == ["lease lost"]
    ended = RunDriver(run.pk, lease_holder="second-driver").drive()
    # What did not succeed, and why: the one CI failure of this case (xrootd) said only "partial".
    failed = list(Transfer.objects.filter(run=run).exclude(state=TransferState.SUCCEEDED)
                  .values_list("index", "attempt", "state", "error_category", "error_message"))  # fmt: skip
    assert ended == RunState.SUCCEEDED, failed
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

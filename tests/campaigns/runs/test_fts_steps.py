"""Concurrency steps on FTS as FTS really schedules them (the double reproduces it, see
tests/support/fts_double.py): a link range set with POST /config/links is obeyed only from the
optimizer's next pass, a link the optimizer has no value for gets up to 10 files per scheduling
pass, and the optimizer's last value outlives the run.

What is shown: a naive client gets the burst; a StorageOps sweep holds every step anyway, read
both from the double's own counts and from the Transfer rows' FTS start/finish times; a second
run starts under the value the first one left and still holds its step 1; cancelled files end
with FTS's finish time and files never started have no duration.
"""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from campaigns import runs
from campaigns.choices import RunState, TransferState
from campaigns.models import Run, RunStep, Transfer
from campaigns.runs.engines.fts import executor as fts_executor
from campaigns.runs.engines.fts import landed
from campaigns.runs.engines.fts.client import FtsClient, FtsSettings, parse_time
from campaigns.runs.engines.fts.models import FtsInstance
from campaigns.runs.engines.fts.store import with_ids
from campaigns.runs.lifecycle import RunDriver
from collectors.models import Event
from tests.support.factories import mock_campaign
from tests.support.fts_double import FILES_PER_PASS, FtsDouble

pytestmark = pytest.mark.django_db(transaction=True)
TOKEN = "steps-token"
LINK = ("mock://src.test", "mock://dst.test")


def instance(double: FtsDouble) -> FtsInstance:
    values = {"bearer_token": TOKEN, "files_per_job": 4, "manage_link_limits": True, "poll_seconds": 0.3}
    return FtsInstance.objects.get_or_create(name=f"steps-{double.url}", url=double.url, defaults=values)[0]


def new_run(name: str, double: FtsDouble, seconds: int, **fields) -> Run:
    fields = {"checksum_mode": "none", "file_size": 1_000_000, "engine": "fts",
              "engine_options": {"instance": instance(double).pk},
              **fields}  # fmt: skip
    return runs.create_run(mock_campaign(name, dst_query=f"time={seconds}", **fields), trigger="command")


def wait_for(condition, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def drive(run_id: int, result: list) -> None:
    try:
        result.append(RunDriver(run_id).drive())
    finally:
        connection.close()  # the thread's own connection, or the test database stays in use


def in_flight(rows: list[Transfer], target: dict[int, int]) -> list[tuple[int, set[int], int]]:
    """At each second a transfer started: how many were in flight, the steps of the transfers
    that started then, and the most those steps allow. From FTS's own times, to the second, as
    [started_at, finished_at) intervals: flooring both ends keeps intervals that did not overlap
    apart, so this never counts more than really ran. A step's first file may start in the same
    second as the previous step's last one: that second is held to the larger of the two."""
    found = []
    for second in sorted({t.started_at for t in rows}):
        n = sum(1 for o in rows if o.started_at == second or o.started_at <= second < o.finished_at)
        steps = {t.step for t in rows if t.started_at == second}
        found.append((n, steps, max(target[s] for s in steps)))
    return found


def decided(run: Run) -> list[int]:
    """The optimizer values in the run's record of FTS's evolution, repeats collapsed."""
    values: list[int] = []
    for entry in run.summary["fts"]["optimizer"][f"{LINK[0]} {LINK[1]}"]:
        if not values or values[-1] != entry["active"]:
            values.append(entry["active"])
    return values


def test_a_naive_client_gets_ten_files_per_pass_on_a_new_link_whatever_its_range():
    """What real FTS does, reproduced: the range set on the link is not in force until the
    optimizer's pass; until then the scheduler starts 10 files per pass."""
    double = FtsDouble(token=TOKEN, optimizer_interval=2.5, scheduler_interval=1.0).start()
    try:
        client = FtsClient(FtsSettings(url=double.url, bearer_token=TOKEN))
        client.set_link({"source": LINK[0], "destination": LINK[1], "symbolicname": "naive",
                         "min_active": 1, "max_active": 1})  # fmt: skip
        files = [{"sources": [f"mock://src.test/n/{i}?size=1000"], "destinations": [f"mock://dst.test/n/{i}?time=5"]}
                 for i in range(30)]  # fmt: skip
        job_id = client.submit({"files": files, "params": {}})
        wait_for(lambda: len(double.pass_starts) >= 2, timeout=10)
        assert double.passes == 0  # no optimizer pass yet
        # Ten files in the first pass, ten more in the next: the link "limited to 1" runs 20.
        assert double.pass_starts[:2] == [(LINK, FILES_PER_PASS, None), (LINK, FILES_PER_PASS, None)]
        assert double.peaks[(*LINK, None)] == 2 * FILES_PER_PASS
        # The optimizer's pass puts the range in force: no file starts while 1 or more run.
        wait_for(lambda: double.passes >= 1, timeout=10)
        (decision,) = client.optimizer_evolution(*LINK)
        assert (decision["active"], decision["rationale"]) == (1, "No information. Use configured range max.")
        time.sleep(1.0)
        assert sum(1 for f in double.files.values() if f["start_time"]) == 2 * FILES_PER_PASS
        client.cancel([job_id])
    finally:
        double.stop()


def test_a_sweep_on_a_new_link_holds_each_steps_concurrency_anyway():
    double = FtsDouble(token=TOKEN, optimizer_interval=2.0).start()
    try:
        run = new_run("steps-sweep", double, 2, file_count=15, concurrency_steps=[1, 2, 4], step_files=5)
        assert RunDriver(run.pk).drive() == RunState.SUCCEEDED, double.crashes
    finally:
        double.stop()
    run.refresh_from_db()
    assert (run.files_done, run.files_failed, run.stop_reason) == (15, 0, "concurrency sweep completed")
    target = dict(RunStep.objects.filter(run=run).values_list("index", "concurrency"))
    assert target == {0: 1, 1: 2, 2: 4}
    # The link was new: FTS would have started 10 files at once; StorageOps gave it one.
    assert double.pass_starts[0] == (LINK, 1, None)
    # FTS's side: under each optimizer value, never more copies at once than the step allowed.
    assert double.peaks[(*LINK, None)] <= 1
    assert {value for (_, _, value) in double.peaks} == {None, 1, 2, 4}
    assert all(count <= value for (_, _, value), count in double.peaks.items() if value is not None)
    rows = list(with_ids(Transfer.objects).filter(run=run).order_by("started_at", "pk"))
    for t in rows:
        under = double.started_under[t.fts_file_id]
        assert (under is None and t.step == 0) or (under is not None and under <= target[t.step]), (t.step, under)
    # The rows' side, from FTS's own start and finish times: never more in flight than the step's target.
    flights = in_flight(rows, target)
    assert all(n <= allowed for n, _, allowed in flights), flights
    widest = {step: max(n for n, steps, _ in flights if steps == {step}) for step in target}
    assert widest[0] == 1 and widest[2] >= 3, widest  # and the last step really ran wider
    # The optimizer's record: each step's value put in force in turn, and seen by StorageOps.
    assert decided(run) == [1, 2, 4]
    assert Event.objects.filter(run_id=run.pk, kind="fts_config", summary__contains="in force").count() == 3


def test_a_second_run_starts_under_the_value_the_first_left_and_still_holds_its_step_1():
    double = FtsDouble(token=TOKEN, optimizer_interval=1.0).start()
    try:
        first = new_run("steps-first", double, 1, file_count=8, concurrency_steps=[4])
        assert RunDriver(first.pk).drive() == RunState.SUCCEEDED
        # The link config StorageOps made is gone; the optimizer's value is not.
        assert set(double.links) == {"*"} and double.optimizer[LINK] == 4
        # No pass until the second run's first file has started under the old value.
        double.optimizer_interval = None
        second = new_run("steps-second", double, 2, file_count=6, concurrency_steps=[1, 2], step_files=3)
        result: list = []
        thread = threading.Thread(target=drive, args=(second.pk, result), daemon=True)
        thread.start()
        wait_for(lambda: with_ids(Transfer.objects).filter(run=second).exclude(fts_job_id="").exists())
        wait_for(lambda: any(f["start_time"] for f in double.files.values() if f["file_metadata"]["run"] == second.pk))
        double.optimizer_interval = 1.0
        thread.join(90)
        assert result == [RunState.SUCCEEDED]
    finally:
        double.stop()
    rows = list(with_ids(Transfer.objects).filter(run=second).order_by("started_at", "pk"))
    target = dict(RunStep.objects.filter(run=second).values_list("index", "concurrency"))
    # FTS's value was still 4 when the step of 1 began...
    assert double.started_under[rows[0].fts_file_id] == 4 and rows[0].step == 0
    # ...and the step held 1 all the same (then 2), by FTS's own times.
    assert all(n <= allowed for n, _, allowed in in_flight(rows, target)), in_flight(rows, target)
    second.refresh_from_db()
    assert decided(second)[-2:] == [1, 2] and second.files_done == 6


def cancelled_run(double: FtsDouble) -> Run:
    run = new_run("steps-cancel", double, 6, file_count=12, concurrency_steps=[2], cancel_grace=1)
    result: list = []
    thread = threading.Thread(target=drive, args=(run.pk, result), daemon=True)
    thread.start()
    # Two copying, and more queued in FTS (the link is kept full once its value is in force).
    states = lambda: [f["file_state"] for f in double.files.values()]  # noqa: E731
    wait_for(lambda: states().count("ACTIVE") == 2 and "SUBMITTED" in states())
    assert runs.request_cancel(Run.objects.get(pk=run.pk))
    thread.join(60)
    assert result == [RunState.CANCELLED]
    run.refresh_from_db()
    return run


def not_whole(monkeypatch) -> None:
    """gfal2's mock plugin answers a stat and a checksum for any URL, so a cancelled copy would be
    found whole on its mock destination: here none is (tests/campaigns/runs/test_fts_cancel.py
    checks real destinations)."""
    monkeypatch.setattr(landed, "examine", lambda *args, **kwargs: landed.Found(False))


def test_files_cancelled_while_copying_get_the_finish_time_fts_gives_them_later(monkeypatch):
    not_whole(monkeypatch)
    double = FtsDouble(optimizer_interval=1.0, token=TOKEN, kill_delay=1.5).start()
    try:
        run = cancelled_run(double)
    finally:
        double.stop()
    rows = list(with_ids(Transfer.objects).filter(run=run, state=TransferState.CANCELLED).exclude(fts_job_id=""))
    copying = [t for t in rows if t.started_at]
    assert len(copying) == 2
    for t in copying:
        f = double.files[t.fts_file_id]
        assert t.finished_at == parse_time(f["finish_time"]) and t.finished_at >= t.started_at
        # FTS's reason first, then the cancel and the copy's own times in their order.
        assert f["reason"] == "Job canceled by the user" and t.error_message.startswith(f["reason"])
        assert t.duration == (t.finished_at - t.started_at).total_seconds()  # FTS says 0 for it
    # The files FTS held but had not started: skipped, never started, no duration.
    never = list(with_ids(Transfer.objects).filter(run=run, state=TransferState.SKIPPED).exclude(fts_job_id=""))
    assert never and all(t.duration is None and t.started_at is None and t.finished_at for t in never)


def test_a_cancelled_file_fts_never_gives_a_finish_time_is_closed_when_seen_with_a_note(monkeypatch):
    monkeypatch.setattr(fts_executor, "CANCEL_FINISH_WAIT", 1.0)
    not_whole(monkeypatch)
    double = FtsDouble(optimizer_interval=1.0, token=TOKEN, kill_delay=None).start()
    try:
        before = time.time()
        run = cancelled_run(double)
    finally:
        double.stop()
    copying = list(with_ids(Transfer.objects).filter(run=run, state=TransferState.CANCELLED, started_at__isnull=False))
    assert len(copying) == 2
    for t in copying:
        assert double.files[t.fts_file_id]["finish_time"] is None
        assert t.finished_at.timestamp() >= before and t.error_category == "cancelled"
        assert t.error_message.startswith("Job canceled by the user (FTS gave no finish time within 1 s")

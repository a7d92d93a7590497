"""Crash safety with real processes: SIGKILLed workers, dropped database connections and a
restarted broker delay a run but never lose or double-count a transfer."""

from __future__ import annotations

import time
from collections import Counter
from urllib.parse import urlsplit

import pytest
from django.db import connection
from django.db.models import Avg

from campaigns import runs
from campaigns.choices import RunState
from campaigns.models import Run, Transfer
from campaigns.runs import store as transfer_store
from collectors.choices import EventKind
from collectors.models import Event
from tests.support.factories import campaign, endpoint, mock_campaign
from tests.support.ports import free_port
from tests.support.processes import ManagedProcess
from tests.support.workers import celery_worker

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

# A dead driver's run is taken over once its heartbeat is this old. At 5 s a living driver's
# heartbeat slipped past it on a machine loaded twice over: its own run was taken from it, and
# the copies it had in flight were tried a second time (correctly, but not what this test counts).
LEASE = "10"


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.25)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def other_database_sessions() -> int:
    """Client sessions on the test database besides this one (a killed worker's, until they end;
    autovacuum's workers, busy after 20,000 rows, are not clients)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND backend_type = 'client backend'"
        )
        return cursor.fetchone()[0]


def progress(run_id: int) -> int:
    run = Run.objects.get(pk=run_id)
    if run.state == RunState.FAILED:
        raise AssertionError(f"run {run_id} failed: {run.error[-2000:]}")
    return run.files_done + run.files_failed


def assert_exactly_one_final_record_each(run: Run, planned: int) -> None:
    rows = list(Transfer.objects.filter(run=run).values_list("index", "state"))
    indexes = Counter(index for index, _ in rows)
    assert len(indexes) == planned and max(indexes.values()) == 1
    assert sorted(indexes) == list(range(planned))
    assert {state for _, state in rows} <= {"succeeded", "failed", "skipped", "cancelled"}
    run.refresh_from_db()
    assert transfer_store.recount(run.pk) == {
        "files_done": run.files_done,
        "files_failed": run.files_failed,
        "files_skipped": run.files_skipped,
        "files_cancelled": run.files_cancelled,
        "bytes_done": run.bytes_done,
    }
    assert run.files_done + run.files_failed + run.files_skipped + run.files_cancelled == planned


def test_sigkilled_worker_mid_run_is_resumed_without_loss(log_dir):
    planned = 20_000
    campaign = mock_campaign("crash", dst_query="time=1", file_count=planned, file_size=1000, concurrency_steps=[1000])
    first = celery_worker(log_dir, name="doomed", STORAGEOPS_RUN_LEASE_SECONDS=LEASE)
    second = None
    try:
        first.wait_for_log("ready.", timeout=60)
        run = runs.start_run(campaign, trigger="command")
        wait_for(lambda: progress(run.pk) >= 3000, 120, "3,000 finished transfers")
        first.kill()
        killed_at = progress(run.pk)
        assert killed_at < planned, "the run must still be going when the worker dies"
        # A statement the driver sent before it died (a claim of 200 rows) still commits after
        # it: its server process ends only once it finishes. Counted after the last one is gone.
        wait_for(lambda: not other_database_sessions(), 30, "the dead driver's database sessions to end")
        # What the dead driver held: copying, queued for its threads, or finished in memory and
        # not yet written. No other driver runs yet, so this count stands still until the rescue.
        orphans = Transfer.objects.filter(run=run, state="active").count()
        assert orphans > 0

        second = celery_worker(log_dir, name="rescuer", STORAGEOPS_RUN_LEASE_SECONDS=LEASE)
        second.wait_for_log("ready.", timeout=60)
        wait_for(lambda: not Run.objects.get(pk=run.pk).is_live, 240, "the resumed run to end")
        run.refresh_from_db()
        assert run.state == RunState.SUCCEEDED, run.error
        assert run.files_done == planned
        assert_exactly_one_final_record_each(run, planned)
        # Exactly the transfers the dead driver held were tried a second time, recorded once.
        assert Transfer.objects.filter(run=run, attempt=2).count() == orphans
        assert not Transfer.objects.filter(run=run, attempt__gt=2).exists()
        assert "rescuer" in run.executor or run.executor
    finally:
        first.stop()
        if second:
            second.stop()


def test_dropped_database_connections_delay_but_lose_nothing(log_dir):
    planned = 3000
    campaign = mock_campaign("dbdrop", dst_query="time=1", file_count=planned, concurrency_steps=[300])
    worker = celery_worker(log_dir, name="dbdrop")
    try:
        worker.wait_for_log("ready.", timeout=60)
        run = runs.start_run(campaign, trigger="command")
        wait_for(lambda: progress(run.pk) >= 300, 60, "300 finished transfers")
        # What a PostgreSQL restart looks like from the worker: every connection cut.
        for _ in range(3):
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            time.sleep(1.5)
        wait_for(lambda: not Run.objects.get(pk=run.pk).is_live, 120, "the run to end")
        run.refresh_from_db()
        assert run.state == RunState.SUCCEEDED, run.error
        assert_exactly_one_final_record_each(run, planned)
        assert run.files_done == planned
        assert "database unavailable" in worker.log_text()
    finally:
        worker.stop()


def test_broker_restart_mid_run_loses_nothing(log_dir, tmp_path, settings):
    """A private Redis (real redis-server on a free port) is stopped and started mid-run."""
    port = free_port()
    argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    redis = ManagedProcess("redis", argv, {"PATH": "/usr/bin:/bin"}, log_dir).start()
    redis.wait_for_log("Ready to accept connections", timeout=20)
    url = f"redis://127.0.0.1:{port}/0"
    worker = celery_worker(log_dir, name="brokerless", CELERY_BROKER_URL=url, CELERY_RESULT_BACKEND=url)
    try:
        worker.wait_for_log("ready.", timeout=60)
        planned = 2000
        campaign = mock_campaign("redis", dst_query="time=1", file_count=planned, concurrency_steps=[200])
        run = runs.create_run(campaign, trigger="command")
        from storageops.celery import app

        app.send_task(
            "campaigns.drive_run",
            (run.pk,),
            queue=settings.STORAGEOPS_TRANSFERS_QUEUE,
            connection=app.connection_for_write(url),
        )
        wait_for(lambda: progress(run.pk) >= 200, 60, "200 finished transfers")
        redis.stop()
        time.sleep(3)
        redis = ManagedProcess("redis", argv, {"PATH": "/usr/bin:/bin"}, log_dir).start()
        wait_for(lambda: not Run.objects.get(pk=run.pk).is_live, 120, "the run to end")
        run.refresh_from_db()
        assert run.state == RunState.SUCCEEDED, run.error
        assert_exactly_one_final_record_each(run, planned)
        # The worker rode through it (Celery 5.7's consumer exited: storageops.celery_consumer),
        # and its outage watch put the broker's absence on the event log, once.
        assert worker.returncode is None, worker.log_text()[-3000:]
        outage = wait_for(lambda: list(Event.objects.filter(summary__startswith="Broker (Redis) unreachable")), 30,
                          "the broker outage's event")  # fmt: skip
        assert len(outage) == 1 and outage[0].kind == EventKind.RUN_INCIDENT
    finally:
        worker.stop()
        redis.stop()


def seconds_for(run_id: int, copies: int, concurrency: int) -> float:
    """How long `copies` more copies take at the pace this run's finished ones were measured at."""
    pace = Transfer.objects.filter(run_id=run_id, state="succeeded").aggregate(Avg("duration"))["duration__avg"]
    return copies * pace / concurrency


def test_real_copies_survive_two_sigkilled_workers(log_dir, xrootd_pair):
    """200 real root:// copies between two XRootD doors; the worker driving them is SIGKILLed
    twice at different points, a third finishes. Nothing is lost, nothing recorded twice,
    nothing left untried, and every file is on the destination door's disk."""
    door1, door2 = xrootd_pair
    planned, size, concurrency = 200, 100_000, 10  # a root:// TPC takes ~2.5 s whatever its size
    src = endpoint("crash-door1", door1.root_url_for("/data/crash/"))
    dst = endpoint("crash-door2", door2.root_url_for("/data/crash/"))
    obj = campaign(
        "real-crash", [src], [dst], file_count=planned, file_size=size, create_sources=True,
        source_file_count=4, concurrency_steps=[concurrency], checksum_mode="none",
    )  # fmt: skip
    workers = [celery_worker(log_dir, name="real-doomed-1", STORAGEOPS_RUN_LEASE_SECONDS=LEASE)]
    kills, gaps = [], []
    try:
        workers[0].wait_for_log("ready.", timeout=60)
        run = runs.start_run(obj, trigger="command")
        began = time.monotonic()
        wait_for(lambda: progress(run.pk) >= 1, 120, "the first finished copy")
        # Killed early, and again well after the first resume, each time with copies in flight.
        for n, at in enumerate((planned // 4, planned * 13 // 20), start=2):
            # The time those copies take at the pace measured so far, with room for a busy machine,
            # and after a kill the lease to expire and a new worker to take the run over.
            budget = 4 * seconds_for(run.pk, at - progress(run.pk), concurrency) + 60 + 4 * int(LEASE)
            wait_for(lambda at=at: progress(run.pk) >= at, budget, f"{at} finished transfers")
            workers[-1].kill()
            killed_at = time.monotonic()
            kills.append((progress(run.pk), Transfer.objects.filter(run=run, state="active").count()))
            workers.append(celery_worker(log_dir, name=f"real-rescuer-{n}", STORAGEOPS_RUN_LEASE_SECONDS=LEASE))
            workers[-1].wait_for_log("ready.", timeout=60)
            wait_for(lambda n=n: resumed(run.pk) == n - 1, 60 + 4 * int(LEASE), "the run to be resumed")
            gaps.append(time.monotonic() - killed_at)
        budget = 4 * seconds_for(run.pk, planned - progress(run.pk), concurrency) + 60
        wait_for(lambda: not Run.objects.get(pk=run.pk).is_live, budget, "the twice resumed run to end")
        took = time.monotonic() - began
    finally:
        ManagedProcess.stop_all(workers)

    run.refresh_from_db()
    print(f"\n{planned} real copies; SIGKILLs at (finished, active) {kills}; resumed {gaps[0]:.1f} s and "
          f"{gaps[1]:.1f} s after each; {took:.1f} s in all")  # fmt: skip
    assert all(done < planned and active > 0 for done, active in kills), "each kill lands mid-run"
    assert run.state == RunState.SUCCEEDED, (run.state, run.stop_reason, run.error)
    assert_exactly_one_final_record_each(run, planned)
    rows = Transfer.objects.filter(run=run)
    assert set(rows.values_list("state", flat=True)) == {"succeeded"}  # none skipped, none untried
    # The copies each kill cut short were tried again: a second (or third) attempt, recorded once.
    assert 0 < rows.filter(attempt__gt=1).count() <= sum(active for _, active in kills)
    for t in rows:
        assert door2.local_path("/" + urlsplit(t.destination).path.lstrip("/")).stat().st_size == size
    said = Event.objects.filter(run_id=run.pk)
    assert said.filter(kind=EventKind.RUN_START).count() == 1
    assert resumed(run.pk) == 2, list(said.values_list("kind", "summary"))


def resumed(run_id: int) -> int:
    return Event.objects.filter(run_id=run_id, kind=EventKind.RUN_INCIDENT, summary__contains=" resumed by ").count()

"""A pooled run whose broker (a private Redis, a real redis-server on a free port) is SIGKILLed
mid-step and started again empty: every list, hash and heartbeat of the pool's channel gone.

The driver and two real `manage.py client` workers talk only through that Redis. What is
checked: the run ends succeeded with every transfer recorded once, no client was taken for lost
(their beats went with the broker, not their processes), and what the broker lost (jobs waiting
in a client's list, results not yet read) was copied again and said so.
"""

from __future__ import annotations

import time

import pytest
from django.conf import settings

from campaigns import runs
from campaigns.choices import RunState
from campaigns.models import Run, Transfer
from collectors.models import Event, Host
from tests.campaigns.runs.test_crash_safety import assert_exactly_one_final_record_each, progress, wait_for
from tests.support.factories import mock_campaign
from tests.support.ports import free_port
from tests.support.processes import PYTHON, ROOT, ManagedProcess
from tests.support.workers import celery_worker, child_env

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

CLIENTS = ("b1", "b2")
FILES = 48


def redis_server(port: int, log_dir) -> ManagedProcess:
    argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    process = ManagedProcess("redis", argv, {"PATH": "/usr/bin:/bin"}, log_dir).start()
    process.wait_for_log("Ready to accept connections", timeout=20)
    return process


def test_a_pooled_run_rides_through_its_broker_restarted_empty(log_dir):
    port = free_port()
    redis = redis_server(port, log_dir)
    url = f"redis://127.0.0.1:{port}/0"
    env = {"CELERY_BROKER_URL": url, "CELERY_RESULT_BACKEND": url}
    for name in CLIENTS:
        Host.objects.create(name=name, role="client")
    processes = [
        celery_worker(log_dir, name="pool-broker-driver", **env),
        *(
            ManagedProcess(f"client-{name}", [PYTHON, "manage.py", "client", "--host", name, "--loglevel", "info"],
                           child_env(**env), log_dir, cwd=ROOT).start()
            for name in CLIENTS
        ),
    ]  # fmt: skip
    try:
        for process in processes:
            process.wait_for_log("ready.", timeout=60)
        obj = mock_campaign("pool-broker", dst_query="time=1", file_count=FILES, concurrency_steps=[4])
        obj.clients.set(Host.objects.filter(name__in=CLIENTS))
        run = runs.create_run(obj, trigger="command")
        from storageops.celery import app

        app.send_task("campaigns.drive_run", (run.pk,), queue=settings.STORAGEOPS_TRANSFERS_QUEUE,
                      connection=app.connection_for_write(url))  # fmt: skip
        # Mid-step: each client has copies under way and one waiting in its list.
        wait_for(lambda: progress(run.pk) >= 8, 90, "8 finished transfers")
        redis.kill()
        before = progress(run.pk)
        time.sleep(2)  # an outage the driver and the clients feel, their connections retrying
        redis = redis_server(port, log_dir)
        wait_for(lambda: not Run.objects.get(pk=run.pk).is_live, 180, "the run to end")
    finally:
        ManagedProcess.stop_all(processes)
        redis.stop()

    run.refresh_from_db()
    logs = "\n".join(f"--- {p.name}\n{p.log_text()[-3000:]}" for p in processes)
    incidents = list(Event.objects.filter(run_id=run.pk, kind="run_incident").values_list("summary", flat=True))
    report = f"{run.state} {run.stop_reason}\n" + "\n".join(incidents) + "\n" + logs
    assert before < FILES, "the run ended before its broker was killed: nothing was tested"
    assert run.state == RunState.SUCCEEDED, report
    assert_exactly_one_final_record_each(run, FILES)
    assert run.files_done == FILES, report
    # Neither client was lost: their beats went with the broker, not their processes.
    pool = run.summary["client_pool"]
    assert all(not pool[name]["lost"] for name in CLIENTS), (pool, report)
    assert not any(text.startswith("Client ") and " lost " in text for text in incidents), report
    # In the driver's whole log: its tail is its shutdown, which may run longer than 3,000 characters.
    assert "the broker came back empty" in processes[0].log_text(), report
    # What the broker took with it is on the record: the copies begun keep it in their history.
    rebuilt = [text for text in incidents if text.startswith("The broker (Redis) came back empty")]
    broker_lost = [
        t for t in Transfer.objects.filter(run=run) if any(h.get("category") == "broker_lost" for h in t.history)
    ]
    assert len(rebuilt) <= 1, report
    if broker_lost:
        assert rebuilt and all(t.state == "succeeded" for t in broker_lost), report


def test_the_driver_beats_while_its_loop_waits_and_stops_when_the_loop_is_stuck(monkeypatch):
    """The driver's loop waits on a database outage as long as it lasts (campaigns.runs.outages);
    its clients must go on hearing it (a soak's 36-s outage took both clients of a pooled run for
    lost). Its beat comes from a thread: alive while the loop is merely waiting, silent once
    the loop has been silent for LOOP_SILENCE_SECONDS (a stuck driver lets its clients go)."""
    from campaigns.runs.client_pool import channel
    from campaigns.runs.engines.gfal2 import client_pool_executor as pool

    monkeypatch.setattr(channel, "DRIVER_SECONDS", 2.5)  # the driver key's expiry: beats come every 1 s
    monkeypatch.setattr(pool, "LOOP_SILENCE_SECONDS", 4.0)
    obj = mock_campaign("pool-beat", file_count=2)
    obj.clients.set([Host.objects.create(name="beat1", role="client")])
    run = runs.create_run(obj, trigger="command")
    executor = pool.ClientPoolExecutor(run, lease_holder=f"beat-test-{run.pk}")
    executor.conn = channel.connect()
    executor._driver_beat()
    executor._start_beating()
    try:
        time.sleep(3.0)  # the loop asks for nothing: past the first beat's expiry
        assert executor.conn.exists(executor.keys.driver), "the driver went silent while its loop waited"
        time.sleep(4.0)  # silent past LOOP_SILENCE_SECONDS (4 s), the beat stopped; its last key expired
        assert not executor.conn.exists(executor.keys.driver), "a stuck driver still beat"
    finally:
        executor._stop_beating()
        executor.conn.delete(executor.keys.driver)

"""A broker outage reaches the event log once, as what it was, with its start and end.

The test owns its Redis (a real redis-server on a free port), SIGKILLs it and starts it again
on the same port, as the soak does to the site's."""

from __future__ import annotations

import json
import signal
import time
from datetime import datetime

import pytest

from collectors import outages
from collectors.choices import EventKind
from collectors.models import Event
from tests.support.ports import free_port
from tests.support.processes import ManagedProcess

pytestmark = pytest.mark.django_db


def _redis(port: int, log_dir, name: str) -> ManagedProcess:
    # A log of its own each start: the first one's "Ready" must not answer for the second.
    argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    redis = ManagedProcess(f"redis-{port}-{name}", argv, {"PATH": "/usr/bin:/bin"}, log_dir).start()
    redis.wait_for_log("Ready to accept connections", timeout=20)
    return redis


def test_a_killed_broker_is_one_outage_event_with_its_start_and_end(log_dir):
    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    redis = _redis(port, log_dir, "first")
    watch = outages.OutageWatch({"broker": lambda: outages.probe_broker(url)})
    try:
        assert watch.tick() == []
        redis.proc.send_signal(signal.SIGKILL)
        redis.proc.wait(timeout=10)
        redis.stop()
        assert watch.tick() == []  # down: nothing to log until it is over
        time.sleep(1.5)
        assert watch.tick() == []
        redis = _redis(port, log_dir, "again")
        [event] = watch.tick()
    finally:
        redis.stop()
    assert event.kind == EventKind.RUN_INCIDENT
    assert event.summary.startswith("Broker (Redis) unreachable for ")
    detail = json.loads(event.detail)
    start, end = datetime.fromisoformat(detail["start"]), datetime.fromisoformat(detail["end"])
    assert event.time == start and 1.5 <= (end - start).total_seconds() == pytest.approx(detail["seconds"], abs=0.1)
    assert detail["outage"] == "broker" and detail["error"]
    # Another main worker saw the same outage a probe later: it is not logged twice.
    assert outages.record_outage("broker", start, end) is None
    assert Event.objects.filter(summary__startswith="Broker").count() == 1
    assert watch.tick() == []


def test_a_broker_started_again_between_two_probes_is_an_outage_all_the_same(log_dir):
    """Redis SIGKILLed and started again before the next probe (a soak's 1-s outage): no probe
    failed, but a new run_id answered; the outage is logged between the two good probes."""
    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    redis = _redis(port, log_dir, "first")
    watch = outages.OutageWatch({"broker": lambda: outages.probe_broker(url)})
    try:
        assert watch.tick() == []
        assert watch.tick() == []  # the same instance: nothing
        before = datetime.now().astimezone()
        redis.proc.send_signal(signal.SIGKILL)
        redis.proc.wait(timeout=10)
        redis.stop()
        redis = _redis(port, log_dir, "again")
        [event] = watch.tick()
    finally:
        redis.stop()
    assert event.summary.startswith("Broker (Redis) unreachable for ")
    detail = json.loads(event.detail)
    assert detail["error"].startswith("restarted between two probes (instance ")
    start, end = datetime.fromisoformat(detail["start"]), datetime.fromisoformat(detail["end"])
    assert start <= before <= end
    assert watch.tick() == []


def test_the_database_probe_names_its_server_instance():
    first, second = outages.probe_database(), outages.probe_database()
    assert first.error is None and first.instance and first.instance == second.instance

"""A broker outage reaches the event log once, as what it was, with its start and end.

The test owns its Redis (a real redis-server on a free port), SIGKILLs it and starts it again
on the same port, as the soak does to the site's."""

from __future__ import annotations

import json
import signal
import time
from datetime import datetime, timedelta

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


def test_a_watcher_killed_during_an_outage_is_taken_up_by_the_next_which_logs_it_once(log_dir, tmp_path):
    """The main worker SIGKILLed while Redis was down (its watcher gone with it), started again
    after Redis came back: the new watcher takes up what the old one kept and logs the outage
    from its start, once. Without the kept state nothing would ever log it."""
    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    memory = tmp_path / "run" / "outage-watch.json"
    redis = _redis(port, log_dir, "first")
    killed = outages.OutageWatch({"broker": lambda: outages.probe_broker(url)}, memory=memory)
    try:
        assert killed.tick() == []
        redis.proc.send_signal(signal.SIGKILL)
        redis.proc.wait(timeout=10)
        redis.stop()
        assert killed.tick() == []  # seen down, then the watcher dies with its worker
        seen_down = datetime.now().astimezone()
        del killed
        time.sleep(1.0)
        redis = _redis(port, log_dir, "again")
        heir = outages.OutageWatch({"broker": lambda: outages.probe_broker(url)}, memory=memory)
        [event] = heir.tick()
        assert heir.tick() == []
    finally:
        redis.stop()
    detail = json.loads(event.detail)
    start = datetime.fromisoformat(detail["start"])
    assert start <= seen_down and detail["seconds"] >= 1.0 and "Connection" in detail["error"]
    assert Event.objects.filter(summary__startswith="Broker").count() == 1


def test_a_watcher_takes_up_only_recent_knowledge_of_the_same_servers(tmp_path):
    """Knowledge older than CARRY_SECONDS is not taken up (the site was stopped, nobody watched)."""
    memory = tmp_path / "outage-watch.json"
    now = datetime.now().astimezone()
    answers = iter([outages.Answer("refused"), outages.Answer(None, "B"), outages.Answer(None, "C")])
    first = outages.OutageWatch({"broker": lambda: next(answers)}, clock=lambda: now, memory=memory)
    first.tick()
    assert "broker" in first.down
    later = now + timedelta(seconds=outages.CARRY_SECONDS + 1)
    stale = outages.OutageWatch({"broker": lambda: next(answers)}, clock=lambda: later, memory=memory)
    assert stale.down == {} and stale.tick() == []
    assert not Event.objects.filter(summary__startswith="Broker").exists()
    # B answered and was kept; C answering a moment later, to a new watcher, is a restart seen.
    soon = later + timedelta(seconds=5)
    heir = outages.OutageWatch({"broker": lambda: next(answers)}, clock=lambda: soon, memory=memory)
    [event] = heir.tick()
    assert json.loads(event.detail)["error"] == "restarted between two probes (instance B -> C)"


def test_each_deployment_keeps_its_watch_in_a_file_of_its_own(settings):
    mine = outages.memory_file()
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"
    assert outages.memory_file() != mine and outages.memory_file().parent == mine.parent

"""A worker that dies without shutting down is on the event log once, when it comes back.

Real Celery workers: one SIGKILLed while it held nothing (no run would ever say it died) and
started again under its node name logs one "worker lost" event naming the dead pid and when it
was last alive; one stopped cleanly and started again logs none. Then the identity rules on
their own: a pid now held by another process (its start time differs) is a death too; the
database unreachable at the restart keeps the event until it answers.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from collectors import worker_lives
from collectors.choices import EventKind
from collectors.models import Event
from tests.support.ports import free_port
from tests.support.workers import celery_worker

pytestmark = pytest.mark.django_db(transaction=True)


def wait_for(predicate, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {seconds} s waiting for {what}")


def lost() -> list[Event]:
    return list(Event.objects.filter(kind=EventKind.WORKER_LOST).order_by("time"))


@pytest.mark.slow
def test_a_worker_killed_holding_nothing_is_logged_when_it_starts_again_and_a_clean_stop_is_not(log_dir):
    name = f"lifeline-{os.getpid()}"
    first = celery_worker(log_dir, name=name)
    second = third = None
    try:
        first.wait_for_log("ready.", timeout=60)
        began = datetime.now(UTC)
        [alive] = list(worker_lives.folder().glob(f"*{name}@*.alive"))
        node = alive.name.removesuffix(".alive").removeprefix(os.environ.get("STORAGEOPS_QUEUE_PREFIX", ""))
        dead_pid = first.pid
        time.sleep(worker_lives.BEAT_SECONDS + 1)  # at least one beat: "last alive" is after the start
        first.kill()
        killed = datetime.now(UTC)
        assert not lost(), "nothing is said before the worker is back"

        second = celery_worker(log_dir, name=name)
        second.wait_for_log("ready.", timeout=60)
        [event] = wait_for(lost, 30, "the worker's death on the event log")
        said = f"Worker {node} (pid {dead_pid}) died without shutting down; last known alive at "
        assert event.summary.startswith(said), event.summary
        # Last alive: its last beat, between its start and its kill.
        assert began - timedelta(seconds=1) <= event.time <= killed + timedelta(seconds=1), (event.time, began, killed)
        assert event.host is None and event.run_id is None

        second.stop()  # SIGTERM: a warm shutdown removes its file
        assert not alive.exists()
        # Every shutdown hook ran (the outage watch's end, the collector loop's): none raised.
        assert "Signal handler" not in second.log_text(), second.log_text()[-3000:]
        third = celery_worker(log_dir, name=name)
        third.wait_for_log("ready.", timeout=60)
        time.sleep(1)
        assert len(lost()) == 1, [e.summary for e in lost()]
    finally:
        for worker in (first, second, third):
            if worker is not None:
                worker.stop()


def test_a_pid_now_held_by_another_process_is_a_death_and_a_living_worker_is_not(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    child = subprocess.Popen(["/bin/sleep", "60"])
    try:
        # The record of a worker still running: another worker taking its name finds it alive.
        worker_lives._write(
            worker_lives._file("w@h"), {"pid": child.pid, "started": worker_lives.process_start(child.pid)}
        )
        assert worker_lives.started("w@h") is None and not lost()
        # The same pid with another start time is another process: the recorded one is dead.
        worker_lives._write(
            worker_lives._file("w@h"), {"pid": child.pid, "started": worker_lives.process_start(child.pid) - 1}
        )
        summary = worker_lives.started("w@h")
        assert summary and summary.startswith(f"Worker w@h (pid {child.pid}) died") and len(lost()) == 1
    finally:
        child.kill()
        child.wait()
    # This process's own record (it just started as w@h), stopped cleanly: no file, no event.
    worker_lives.stopped("w@h")
    assert not worker_lives._file("w@h").exists()
    assert worker_lives.started("w@h") is None and len(lost()) == 1


def test_a_death_found_while_the_database_is_down_is_logged_once_it_answers(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    child = subprocess.Popen(["/bin/true"])
    child.wait()  # a pid that is gone
    worker_lives._write(worker_lives._file("w@h"), {"pid": child.pid, "started": 1})
    with database_unreachable():
        assert worker_lives.started("w@h")
        assert worker_lives.flush() == 1  # still waiting: nothing answers
    assert not lost()
    assert worker_lives.flush() == 0
    [event] = lost()
    assert event.summary.startswith(f"Worker w@h (pid {child.pid}) died without shutting down")


@contextlib.contextmanager
def database_unreachable():
    """This process's connection pointed at a port nothing listens on (a database that is down)."""
    saved = dict(connection.settings_dict)
    connection.close()
    connection.settings_dict.update(HOST="127.0.0.1", PORT=str(free_port()))
    try:
        yield
    finally:
        connection.close()
        connection.settings_dict.clear()
        connection.settings_dict.update(saved)

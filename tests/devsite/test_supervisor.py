"""The supervisor of `make run` restarts a child that dies, with back-off, and leaves the others be."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from devsite.processes import cmdline, is_alive, start_time
from devsite.supervisor import MAX_BACKOFF, STABLE_AFTER, Supervisor, backoff, exit_text
from tests.support.processes import PYTHON

SLEEPER = [PYTHON, "-c", "import time; time.sleep(300)"]
QUITTER = [PYTHON, "-c", "import sys; sys.exit(3)"]


def _tend_until(supervisor: Supervisor, done, seconds: float = 15.0) -> float:
    started = time.monotonic()
    while not done():
        assert time.monotonic() - started < seconds, "not done in time"
        supervisor.tend()
        time.sleep(0.05)
    return time.monotonic() - started


def _running(child) -> None:
    """Wait until the child runs its program (setpriv has exec'd it), so that a signal is its own."""
    deadline = time.monotonic() + 30
    while cmdline(child.pid) != SLEEPER:
        assert time.monotonic() < deadline, cmdline(child.pid)
        time.sleep(0.02)


def test_backoff_doubles_from_one_second_up_to_its_cap():
    assert [backoff(n) for n in range(1, 8)] == [1, 2, 4, 8, 16, 30, 30]
    assert MAX_BACKOFF == 30
    assert exit_text(-signal.SIGKILL) == "killed by SIGKILL"
    assert exit_text(3) == "exit code 3"


def test_a_killed_child_is_restarted_and_the_others_carry_on(tmp_path):
    said: list[str] = []
    supervisor = Supervisor(tmp_path / "run", say=said.append)
    try:
        supervisor.start("door", SLEEPER)
        supervisor.start("worker", SLEEPER)
        door, worker = supervisor.children
        _running(door)
        _running(worker)
        old_pid, worker_pid, worker_started = door.pid, worker.pid, start_time(worker.pid)

        os.kill(old_pid, signal.SIGKILL)
        seconds = _tend_until(supervisor, lambda: door.restarts == 1)

        assert door.pid != old_pid and door.returncode is None
        assert 0.9 <= seconds < 5, seconds  # the first back-off is a second
        assert is_alive(worker_pid, worker_started), "the other child is left alone"
        assert worker.restarts == 0
        assert said[0].startswith(f"door (pid {old_pid}) exited (killed by SIGKILL) after "), said
        assert said[0].endswith("; restarting it in 1 s."), said
        assert said[1] == f"door restarted (pid {door.pid}, restart 1).", said
        assert json.loads((tmp_path / "run" / "door.pid").read_text())["pid"] == door.pid
        print(f"SIGKILL to a supervised child: running again after {seconds:.2f} s")
    finally:
        supervisor.stop_all(grace=2)
    assert not is_alive(door.pid) and not is_alive(worker_pid)
    assert not list((tmp_path / "run").glob("*.pid"))


def test_a_child_that_keeps_dying_backs_off_and_one_that_stayed_up_starts_afresh(tmp_path):
    said: list[str] = []
    supervisor = Supervisor(say=said.append)
    try:
        supervisor.start("broken", QUITTER)
        child = supervisor.children[0]
        child.proc.wait(timeout=30)
        now = time.monotonic()
        waits = []
        for _ in range(7):
            supervisor.tend(now=now)  # notices the death, schedules the restart
            waits.append(child.due - now)
            now = child.due
            supervisor.tend(now=now)  # restarts it, and it exits 3 again
            child.started = now  # on the test's clock, which runs ahead of the real one
            child.proc.wait(timeout=30)
        assert [round(w) for w in waits] == [1, 2, 4, 8, 16, 30, 30]
        assert "broken (pid" in said[0] and "exited (exit code 3)" in said[0], said

        # Up for longer than STABLE_AFTER before it died: the next restart is a second away.
        child.started = now - STABLE_AFTER - 1
        supervisor.tend(now=now)
        assert child.due - now == 1
    finally:
        supervisor.stop_all(grace=2)


def test_a_restart_that_fails_is_tried_again_later(tmp_path):
    said: list[str] = []
    attempts: list[float] = []

    def flaky() -> subprocess.Popen:
        attempts.append(time.monotonic())
        if len(attempts) < 2:
            raise RuntimeError("port 1094 in use")
        return subprocess.Popen(SLEEPER, start_new_session=True)

    supervisor = Supervisor(say=said.append)
    supervisor.watch("door", subprocess.Popen(QUITTER, start_new_session=True), restart=flaky)
    try:
        _tend_until(supervisor, lambda: supervisor.children[0].restarts == 1)
        assert len(attempts) == 2
        assert 1.5 <= attempts[1] - attempts[0] < 4, attempts  # the second back-off: 2 s
        assert "door did not start again (port 1094 in use); trying again in 2 s." in said, said
    finally:
        supervisor.stop_all(grace=2)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
def test_stop_all_stops_a_restarted_child(tmp_path, sig):
    supervisor = Supervisor(say=lambda text: None)
    supervisor.start("collector", SLEEPER)
    child = supervisor.children[0]
    _running(child)
    os.kill(child.pid, sig)
    _tend_until(supervisor, lambda: child.restarts == 1)
    pid, started = child.pid, start_time(child.pid)
    supervisor.stop_all(grace=2)
    assert not is_alive(pid, started)

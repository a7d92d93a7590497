"""`make run`'s command started whole for a test (the launcher, its own PostgreSQL and Redis,
runsite and everything it starts) and stopped by a signal, with every process of its tree checked
gone by pid and start time."""

from __future__ import annotations

import os
import signal
import time
import urllib.request
from pathlib import Path

from devsite.processes import descendants, is_alive, start_time
from tests.support.processes import PYTHON, ROOT, ManagedProcess

#: runsite, gunicorn master + 2 workers, the two Celery workers (transfers, control) + 2 pool
#: processes each, beat, the group guard; the launcher's own: a postmaster and at least 4 of its
#: helpers, redis-server, its group guard.
TREE_SIZE = 12 + 7
#: With the demo site: its 2 XRootD doors, a collector for each (a Celery worker and its one pool
#: process), and 2 pool clients (a Celery worker with threads each).
DEMO = 2 + 2 * 2 + 2


#: Seconds a site may take to start before the test says it hung.
START_GUARD = 240


def status(port: int) -> int:
    """/healthz's HTTP status, 0 when nothing answers."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
            return response.status
    except OSError:
        return 0


def start(log_dir: Path, var_dir: Path, port: int, name: str, *options: str) -> ManagedProcess:
    """The launcher running runsite on ``port`` (its own servers under ``var_dir``), once it answers."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env.update({"STORAGEOPS_VAR_DIR": str(var_dir), "GFAL_PYTHONBIN": "/usr/bin/python3"})
    argv = [PYTHON, "-m", "devsite.launch", "--", PYTHON, "manage.py", "runsite", "--bind", f"127.0.0.1:{port}",
            *options]  # fmt: skip
    return wait_until_up(ManagedProcess(name, argv, env, log_dir, cwd=ROOT).start(), port)


def wait_until_up(site: ManagedProcess, port: int) -> ManagedProcess:
    """``site`` (a runsite, launched or not) once it said it is up and /healthz answers 200."""
    began = time.monotonic()
    while True:
        up, answer = "StorageOps is up" in site.log_text(), status(port)
        if up and answer == 200:
            return site
        assert site.returncode is None, site.log_text()[-3000:]
        # A guard against a start that hangs, not a speed figure: a fresh site migrates a new
        # database and starts a dozen Python processes, beside five other test processes on
        # two cores (it took 90 s once in CI).
        waited = time.monotonic() - began
        assert waited < START_GUARD, (
            f"after {waited:.0f} s: 'StorageOps is up' {'printed' if up else 'not printed'}, /healthz "
            f"{answer or 'not answering'}\n{site.log_text()[-3000:]}"
        )
        time.sleep(0.3)


def tree(site: ManagedProcess, size: int) -> dict[int, int]:
    """The site's processes (pid: start time), once there are ``size`` of them (or after 30 s)."""
    deadline = time.monotonic() + 30
    while True:
        found = {pid: start_time(pid) for pid in descendants(site.pid)}
        if len(found) >= size or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def stop_and_check(site: ManagedProcess, sig: int, size: int) -> float:
    """Send ``sig`` to the launcher alone; the seconds until none of its tree is left (at most 10)."""
    processes = tree(site, size)
    # At least: a door may be running an xrdcp for a demo copy, which must go too.
    assert len(processes) >= size, (processes, site.log_text()[-3000:])
    started = time.monotonic()
    os.kill(site.pid, sig)
    while time.monotonic() - started < 10:
        left = [pid for pid, started_at in processes.items() if is_alive(pid, started_at)]
        if not left:
            break
        time.sleep(0.05)
    seconds = time.monotonic() - started
    assert not left, f"{len(left)} of runsite's processes still alive after 10 s: {left}\n{site.log_text()[-3000:]}"
    site.proc.wait(timeout=10)
    print(f"{signal.Signals(sig).name} to {site.name}: its {len(processes)} processes gone in {seconds:.2f} s")
    return seconds

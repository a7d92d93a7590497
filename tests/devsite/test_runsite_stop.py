"""`make run` never leaves a process behind, however it is stopped (issue 22).

`make run`'s whole tree (the launcher, its own PostgreSQL and Redis, runsite, gunicorn and its
workers, the Celery worker and its pool, beat, both XRootD doors, the pool clients, the group
guards) is started on a free port, recorded by pid and start time from /proc (across sessions:
every child leads one of its own), and the launcher alone (make's child) is sent SIGTERM, SIGHUP
or SIGKILL. Within 10 s no process of the tree may be left, and the next start must bind the
same port, on the same cluster.
"""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.request

import pytest

from devsite.processes import descendants, is_alive, start_time
from tests.support.ports import free_port
from tests.support.processes import PYTHON, ROOT, ManagedProcess

pytestmark = pytest.mark.slow

#: runsite, gunicorn master + 2 workers, Celery worker + 2 pool processes, beat, the group guard;
#: the launcher's own: a postmaster and at least 4 of its helpers, redis-server, its group guard;
#: with the demo site its 2 XRootD doors, a collector for each (a Celery worker and its one pool
#: process), and 2 pool clients (a Celery worker with threads each).
TREE_SIZE = 9 + 7
DEMO = 2 + 2 * 2 + 2


def _start(tmp_path, var_dir, port: int, name: str, *options: str) -> ManagedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env.update({"STORAGEOPS_VAR_DIR": str(var_dir), "GFAL_PYTHONBIN": "/usr/bin/python3"})
    argv = [PYTHON, "-m", "devsite.launch", "--", PYTHON, "manage.py", "runsite", "--bind", f"127.0.0.1:{port}",
            *options]  # fmt: skip
    site = ManagedProcess(name, argv, env, tmp_path, cwd=ROOT).start()
    deadline = time.monotonic() + 90
    while "StorageOps is up" not in site.log_text() or _status(port) != 200:
        assert site.returncode is None, site.log_text()[-3000:]
        assert time.monotonic() < deadline, site.log_text()[-3000:]
        time.sleep(0.3)
    return site


def _status(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
            return response.status
    except OSError:
        return 0


def _tree(site: ManagedProcess, size: int) -> dict[int, int]:
    deadline = time.monotonic() + 30
    while True:
        tree = {pid: start_time(pid) for pid in descendants(site.pid)}
        if len(tree) >= size or time.monotonic() > deadline:
            return tree
        time.sleep(0.2)


def _stop_and_check(site: ManagedProcess, sig: int, size: int) -> float:
    """Send ``sig`` to runsite alone; the seconds until none of its tree is left (at most 10)."""
    tree = _tree(site, size)
    # At least: a door may be running an xrdcp for a demo copy, which must go too.
    assert len(tree) >= size, (tree, site.log_text()[-3000:])
    started = time.monotonic()
    os.kill(site.pid, sig)
    while time.monotonic() - started < 10:
        left = [pid for pid, started_at in tree.items() if is_alive(pid, started_at)]
        if not left:
            break
        time.sleep(0.05)
    seconds = time.monotonic() - started
    assert not left, f"{len(left)} of runsite's processes still alive after 10 s: {left}\n{site.log_text()[-3000:]}"
    site.proc.wait(timeout=10)
    print(f"{signal.Signals(sig).name} to {site.name}: its {len(tree)} processes gone in {seconds:.2f} s")
    return seconds


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGKILL], ids=lambda s: s.name)
def test_runsite_leaves_no_process_behind(tmp_path, var_dir, sig):
    port = free_port()
    site = _start(tmp_path, var_dir, port, "runsite-1")
    try:
        runsite = json.loads((var_dir / "run" / "runsite.pid").read_text())["pid"]
        _stop_and_check(site, sig, TREE_SIZE + DEMO)
        if sig == signal.SIGKILL:
            assert site.returncode == -signal.SIGKILL
        else:
            assert site.returncode == 0, site.log_text()[-3000:]
            assert f"Stopping ({sig.name})" in site.log_text()
            assert "Stopped the own PostgreSQL/Redis" in site.log_text()
        assert _status(port) == 0

        # The same port and var directory; no demo this time, which saves the doors' start.
        again = _start(tmp_path, var_dir, port, "runsite-2", "--no-demo")
        try:
            log = again.log_text()
            if sig == signal.SIGKILL:
                assert f"An earlier runsite (pid {runsite}) did not stop cleanly; its " in log, log[-3000:]
                assert "An earlier launcher did not stop cleanly; its postgres" in log, log[-3000:]
            else:
                assert "An earlier runsite" not in log, log[-3000:]
                assert "An earlier launcher" not in log, log[-3000:]
            _stop_and_check(again, signal.SIGINT, TREE_SIZE)
        finally:
            again.stop()
    finally:
        site.stop()

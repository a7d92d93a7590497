"""`make run` never leaves a process behind, however it is stopped (issue 22).

`make run`'s whole tree (the launcher, its own PostgreSQL and Redis, runsite, gunicorn and its
workers, the Celery worker and its pool, beat, both XRootD doors, the pool clients, the group
guards) is started on a free port, recorded by pid and start time from /proc (across sessions:
every child leads one of its own), and the launcher alone (make's child) is SIGKILLed. Within 10 s
no process of the tree may be left, and the next start must bind the same port, on the same
cluster, saying what it cleaned up. SIGTERM and SIGHUP are sent in test_runsite (after it has used
the site), SIGINT here to the second start.
"""

from __future__ import annotations

import json
import signal

import pytest

from tests.support.ports import free_port
from tests.support.site import DEMO, TREE_SIZE, start, status, stop_and_check

pytestmark = pytest.mark.slow


def test_a_sigkilled_launcher_leaves_no_process_behind_and_the_next_start_cleans_up(tmp_path, var_dir):
    port = free_port()
    site = start(tmp_path, var_dir, port, "runsite-1")
    try:
        runsite = json.loads((var_dir / "run" / "runsite.pid").read_text())["pid"]
        stop_and_check(site, signal.SIGKILL, TREE_SIZE + DEMO)
        assert site.returncode == -signal.SIGKILL
        assert status(port) == 0

        # The same port and var directory; no demo this time, which saves the doors' start.
        again = start(tmp_path, var_dir, port, "runsite-2", "--no-demo")
        try:
            log = again.log_text()
            assert f"An earlier runsite (pid {runsite}) did not stop cleanly; its " in log, log[-3000:]
            assert "An earlier launcher did not stop cleanly; its postgres" in log, log[-3000:]
            stop_and_check(again, signal.SIGINT, TREE_SIZE)
            assert again.returncode == 0, again.log_text()[-3000:]
        finally:
            again.stop()
    finally:
        site.stop()

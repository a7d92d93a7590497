"""Start a set of child processes, watch them, and stop exactly those (by pid) on the way out.

Used by `manage.py runsite` (make run). Each child gets a session of its own so that it
and whatever it forks (gunicorn's and Celery's pools) are signalled as one group, the
group of *our* child, never processes found by name.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass
class Child:
    name: str
    process: subprocess.Popen


class Supervisor:
    def __init__(self) -> None:
        self.children: list[Child] = []

    def start(self, name: str, argv: list[str], env: dict[str, str] | None = None, cwd: str | None = None) -> Child:
        process = subprocess.Popen(argv, env=env, cwd=cwd, start_new_session=True)
        child = Child(name, process)
        self.children.append(child)
        log.info("started %s (pid %d)", name, process.pid)
        return child

    def first_exited(self) -> Child | None:
        for child in self.children:
            if child.process.poll() is not None:
                return child
        return None

    def stop_all(self, timeout: float = 15.0) -> None:
        for child in reversed(self.children):
            _signal_group(child.process, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for child in reversed(self.children):
            try:
                child.process.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                log.warning("%s did not stop in time; killing it", child.name)
                _signal_group(child.process, signal.SIGKILL)
                child.process.wait(timeout=5)
            # Children of the group that outlived their leader go too.
            _signal_group(child.process, signal.SIGKILL)
        self.children.clear()


def _signal_group(process: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        pass

"""A set of child processes watched together and stopped together (make run)."""

from __future__ import annotations

import logging

from devsite.processes import ManagedProcess

log = logging.getLogger(__name__)


class Supervisor:
    def __init__(self) -> None:
        self.children: list[ManagedProcess] = []

    def start(self, name: str, argv: list[str], env: dict[str, str] | None = None, cwd: str | None = None):
        child = ManagedProcess(name, argv, env, cwd=cwd).start()
        self.children.append(child)
        log.info("started %s (pid %d)", name, child.pid)
        return child

    def first_exited(self) -> ManagedProcess | None:
        return next((c for c in self.children if c.returncode is not None), None)

    def stop_all(self) -> None:
        for child in reversed(self.children):
            child.stop(timeout=8)
        self.children.clear()

"""A real Celery worker process pointed at the test database and the configured broker."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from django.conf import settings
from django.db import connection

from tests.support.processes import PYTHON, ROOT, ManagedProcess


def pytest_database_url() -> str:
    """The URL of the database pytest-django created, for child processes."""
    s = connection.settings_dict
    host = s.get("HOST") or "127.0.0.1"
    port = s.get("PORT") or 5432
    auth = s["USER"] + (f":{s['PASSWORD']}" if s.get("PASSWORD") else "") + "@" if s.get("USER") else ""
    return f"postgres://{auth}{host}:{port}/{s['NAME']}"


def worker_queues() -> str:
    return f"{settings.STORAGEOPS_CONTROL_QUEUE},{settings.STORAGEOPS_TRANSFERS_QUEUE}"


def child_env(**overrides: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "storageops.settings",
            "DATABASE_URL": pytest_database_url(),
            "GFAL_PYTHONBIN": "/usr/bin/python3",
            "PYTHONUNBUFFERED": "1",
            # A crash in native code (gfal2, XRootD's client) prints every thread's stack.
            "PYTHONFAULTHANDLER": "1",
        }
    )
    env.update(overrides)
    return env


def celery_argv(command: str, *args: str) -> list[str]:
    return [PYTHON, "-m", "celery", "-A", "storageops", command, *args, "-l", "info"]


def celery_worker(
    log_dir: Path, *, queues: str = "", concurrency: int = 2, name: str | None = None, **env: str
) -> ManagedProcess:
    node = name or f"test-{uuid.uuid4().hex[:8]}"
    queues = queues or worker_queues()
    argv = celery_argv("worker", "-Q", queues, "-c", str(concurrency), "-n", f"{node}@%h", "--without-mingle",
                       "--without-gossip")  # fmt: skip
    return ManagedProcess(node, argv, child_env(**env), log_dir, cwd=ROOT).start()


def celery_beat(log_dir: Path, *, max_interval: int = 1, **env: str) -> ManagedProcess:
    """A real beat process on the database scheduler (settings.CELERY_BEAT_SCHEDULER)."""
    argv = celery_argv("beat", "--max-interval", str(max_interval), "-s", str(log_dir / "celerybeat-schedule"),
                       "--pidfile", str(log_dir / "celerybeat.pid"))  # fmt: skip
    return ManagedProcess(f"beat-{uuid.uuid4().hex[:8]}", argv, child_env(**env), log_dir, cwd=ROOT).start()

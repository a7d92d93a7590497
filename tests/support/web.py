"""The dashboard in a real gunicorn process on the test database, as a deployment serves it."""

from __future__ import annotations

import time
import urllib.request
from pathlib import Path

from tests.support.ports import free_port
from tests.support.processes import PYTHON, ROOT, ManagedProcess
from tests.support.workers import child_env


def gunicorn_server(log_dir: Path, *, workers: int = 1, **env: str) -> tuple[ManagedProcess, str]:
    """gunicorn with sync workers, which close every connection after its answer: a client never
    races the server's keep-alive close, which the threaded development server does under load."""
    port = free_port()
    argv = [PYTHON, "-m", "gunicorn", "storageops.wsgi:application", "-b", f"127.0.0.1:{port}", "-w", str(workers),
            "--timeout", "120",
            # gunicorn's default control socket is one file in the home folder, shared by every
            # gunicorn of the machine: one stopping deletes it under the others.
            "--no-control-socket"]  # fmt: skip
    web = ManagedProcess(f"web-{port}", argv, child_env(**env), log_dir, cwd=ROOT).start()
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=5):
                return web, base
        except OSError:
            if web.returncode is not None:
                break
            time.sleep(0.3)
    web.stop()
    raise AssertionError(f"gunicorn did not answer within 60 s:\n{web.log_text()[-3000:]}")

"""A pytest plugin loaded before Django is set up (`-p tests.support.isolation`).

Several sessions may share this machine's Redis: a session of its own queue names keeps
another session's workers from taking our tasks (and ours from taking theirs). The
workers the tests start inherit the variable, so both ends agree.

pytest-xdist's worker processes inherit the controller's environment, so a name set there
would be shared by all of them, and one process's Celery worker would take another's tasks
(a run left at 0 % while a worker of another test database took it): each xdist worker adds
its own id to the session's prefix.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from pathlib import Path

import pytest

_session = os.environ.setdefault(
    "STORAGEOPS_TEST_QUEUE_PREFIX", os.environ.get("STORAGEOPS_QUEUE_PREFIX", "") or f"test-{uuid.uuid4().hex[:8]}-"
)
_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
os.environ["STORAGEOPS_QUEUE_PREFIX"] = f"{_session}{_worker}-" if _worker else _session

# file:// endpoints only below the roots a deployment names (STORAGEOPS_FILE_ROOTS): the tests'
# are their temporary folders (tmp_path, pytest's --basetemp), all below the system's.
os.environ.setdefault("STORAGEOPS_FILE_ROOTS", tempfile.gettempdir())


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Each session's temporary folders below a root of ours, not pytest's default.

    The tests' XRootD doors run as an unprivileged account and reach their folders because
    their parents are made traversable; pytest strips that from /tmp/pytest-of-<user> each time
    a session starts, so a second session on the machine cut off the first one's doors
    mid-test ("permission denied"). pytest never touches a --basetemp's parents.
    """
    if config.option.basetemp or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    root = Path(tempfile.gettempdir()) / f"storageops-pytest-{os.getuid()}"
    root.mkdir(mode=0o711, exist_ok=True)
    if root.is_symlink() or root.stat().st_uid != os.getuid():
        return  # not ours (a shared /tmp): pytest's default is safer
    root.chmod(0o711)  # others may pass through to the doors' folders, not list the sessions
    _clear_finished_sessions(root, keep=3)
    config.option.basetemp = str(root / f"{os.getpid()}-{_start_time(os.getpid())}")


def _start_time(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return "gone"


def _clear_finished_sessions(root: Path, keep: int) -> None:
    """Remove the folders of sessions whose process is gone, but the ``keep`` latest (to read
    after a failure, as pytest keeps its own)."""
    finished = []
    for folder in root.iterdir():
        pid, _, started = folder.name.partition("-")
        if not (pid.isdigit() and _start_time(int(pid)) == started):
            finished.append(folder)
    finished.sort(key=lambda folder: folder.stat().st_mtime)
    for folder in finished[: max(len(finished) - keep, 0)]:
        shutil.rmtree(folder, ignore_errors=True)

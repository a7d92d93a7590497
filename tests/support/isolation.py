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
import tempfile
import uuid

_session = os.environ.setdefault(
    "STORAGEOPS_TEST_QUEUE_PREFIX", os.environ.get("STORAGEOPS_QUEUE_PREFIX", "") or f"test-{uuid.uuid4().hex[:8]}-"
)
_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
os.environ["STORAGEOPS_QUEUE_PREFIX"] = f"{_session}{_worker}-" if _worker else _session

# file:// endpoints only below the roots a deployment names (STORAGEOPS_FILE_ROOTS): the tests'
# are their temporary folders (tmp_path, pytest's --basetemp), all below the system's.
os.environ.setdefault("STORAGEOPS_FILE_ROOTS", tempfile.gettempdir())

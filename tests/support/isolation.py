"""A pytest plugin loaded before Django is set up (`-p tests.support.isolation`).

Several sessions may share this machine's Redis: a session of its own queue names keeps
another session's workers from taking our tasks (and ours from taking theirs). The
workers the tests start inherit the variable, so both ends agree.
"""

from __future__ import annotations

import os
import uuid

os.environ.setdefault("STORAGEOPS_QUEUE_PREFIX", f"test-{uuid.uuid4().hex[:8]}-")

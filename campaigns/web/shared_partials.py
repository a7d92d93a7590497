"""Partials that read the same for every viewer, rendered once and shared for a moment.

A live run's progress partial is polled by every open run page every 2 s, and carries nothing
of the viewer (no user, form, CSRF token or permission). It is rendered once per state of the
run -- its counters, its step, its stall, its heartbeat -- and clock second, and that rendering
answers every viewer who asks meanwhile: a change to the run, or the next second (the ages of the
copies in flight), renders it afresh. The cache is the process's (Django's default cache).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable

from campaigns.models import Run
from campaigns.web import live_snapshot

# What of the run the progress partial shows (and its HX-Refresh depends on).
PROGRESS_FIELDS = (
    "state", "stop_reason", "files_done", "files_failed", "files_skipped", "files_cancelled", "planned_files",
    "bytes_done", "planned_bytes", "active_transfers", "current_step", "current_concurrency", "throughput_bps",
    "eta_seconds", "stalled_since", "heartbeat_at", "started_at", "finished_at",
)  # fmt: skip


def progress_key(run: Run, now: float | None = None) -> str:
    state = repr(
        (*(getattr(run, name, None) for name in PROGRESS_FIELDS), int(now if now is not None else time.time()))
    )
    return f"storageops:run:{run.pk}:progress:{hashlib.blake2b(state.encode(), digest_size=12).hexdigest()}"


def progress(run: Run, render: Callable[[], str]) -> str:
    """The run's progress partial: a viewer's rendering of this run state and second, or a new one."""
    return live_snapshot.once(f"run:{run.pk}:progress", progress_key(run), render)

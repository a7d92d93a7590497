"""A StorageOps worker that died without shutting down, put on the event log.

A worker SIGKILLed, or killed by the kernel's OOM killer, runs no code of its own on the way
out. The runs it drove say so when the next driver resumes them; a worker that held nothing
left no trace at all. So each worker keeps a small file for its node name under
VAR_DIR/run/workers/: its pid and that process's start time (together an identity a reused pid
cannot fake), touched every BEAT_SECONDS (its mtime is when it was last known alive). A clean
shutdown removes it. A worker that starts and finds its node's file naming a process that is no
longer there logs one event: which worker died, when it was last alive, when it came back.

A pool process killed under a task (the OOM killer picks the largest, often a pool process
driving a run) is seen by the worker's main process, which lives on: Celery fails the task with
WorkerLostError, and that is logged at once.

The files are per host (VAR_DIR is), as node names are: a worker on another host keeps its own.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings
from django.db import connection

from collectors.choices import EventKind
from collectors.events import log_event
from collectors.probes import procfs

log = logging.getLogger(__name__)
BEAT_SECONDS = 10.0
_beat: threading.Event | None = None
_pending: list[dict] = []  # events not yet on the log, oldest first
_pending_lock = threading.Lock()


def folder() -> Path:
    return Path(settings.VAR_DIR) / "run" / "workers"


def _file(node: str) -> Path:
    # A node name is celery@host or name@host, within this deployment (its queue prefix: two
    # deployments on one host name their workers alike). Kept to a safe file name, never a path.
    name = f"{settings.STORAGEOPS_QUEUE_PREFIX}{node}"
    return folder() / (re.sub(r"[^A-Za-z0-9@._-]", "_", name)[:200] + ".alive")


def process_start(pid: int) -> int | None:
    """The process's start time in clock ticks since boot, None when it is gone (or a zombie)."""
    stat = procfs.proc_stat(pid)
    return None if stat is None or stat.state in ("Z", "X") else stat.start_ticks


def started(node: str, now: datetime | None = None) -> str | None:
    """This process starts as worker `node`: log the death of the one before it, if it died
    without shutting down, and record this one. Returns the event's summary, or None."""
    path = _file(node)
    summary = None
    previous = _read(path)
    if previous is not None and previous["pid"] != os.getpid():
        still_there = process_start(previous["pid"]) == previous["started"]
        if not still_there:
            summary = _died(node, previous, path, now or datetime.now(UTC))
    _write(path, {"pid": os.getpid(), "started": process_start(os.getpid()), "node": node})
    return summary


def _died(node: str, previous: dict, path: Path, now: datetime) -> str:
    last = datetime.fromtimestamp(path.stat().st_mtime, tz=UTC)
    summary = (
        f"Worker {node} (pid {previous['pid']}) died without shutting down; last known alive at "
        f"{last:%H:%M:%S} UTC, started again at {now:%H:%M:%S} UTC"
    )
    down = (now - last).total_seconds()
    detail = f"Down for at most {down:.0f} s. Runs it drove are resumed by the next driver once their lease is over."
    with _pending_lock:
        _pending.append({"kind": EventKind.WORKER_LOST, "summary": summary, "time": last, "detail": detail})
    flush()
    return summary


def flush() -> int:
    """Log the deaths not yet on the event log; returns how many are still waiting (the
    database may be down as a worker comes back: the beat tries again)."""
    with _pending_lock:
        while _pending:
            try:
                log_event(**_pending[0])
            except Exception:
                log.warning("could not log yet: %s", _pending[0]["summary"], exc_info=True)
                break
            _pending.pop(0)
        return len(_pending)


def stopped(node: str) -> None:
    """A clean shutdown: no death to report at the next start."""
    stop_beating()
    path = _file(node)
    record = _read(path)
    if record is not None and record["pid"] == os.getpid():
        path.unlink(missing_ok=True)


def pool_process_lost(task_name: str, task_id: str, error: BaseException) -> str:
    """A pool process died under a task (Celery's WorkerLostError): one event, now."""
    summary = f"Worker pool process lost under task {task_name} ({task_id}): {error}"[:300]
    with _pending_lock:
        _pending.append({"kind": EventKind.WORKER_LOST, "summary": summary, "time": datetime.now(UTC), "detail": ""})
    flush()
    return summary


def start_beating(node: str) -> None:
    """Touch the node's file every BEAT_SECONDS, from a daemon thread, until stopped."""
    global _beat
    if _beat is not None:
        return
    _beat = stop = threading.Event()
    path = _file(node)

    def beat() -> None:
        while not stop.wait(BEAT_SECONDS):
            try:
                os.utime(path)
            except OSError:
                pass  # removed by a clean shutdown under way
            if _pending:
                flush()
                connection.close()  # this thread's own: not left idle between beats

    threading.Thread(target=beat, name="worker-alive", daemon=True).start()


def stop_beating() -> None:
    global _beat
    if _beat is not None:
        _beat.set()
        _beat = None


def _read(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
        return {"pid": int(data["pid"]), "started": data.get("started"), "node": str(data.get("node", ""))}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write(path: Path, record: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record) + "\n")
    tmp.replace(path)

"""Alert-worthy moments, told by the code where they happen and heard by whoever listens.

The run code names a moment ("run_finished", with the run's id); the alerts app, above it,
registers the task that hears each moment in its own ready(), as the other registries of
storageops work: lower apps never name a higher app's tasks. A moment nobody listens to is
dropped (a deployment without the alerts app), and a broker that cannot take the message loses
an alert, never a run.
"""

from __future__ import annotations

import logging

from celery import current_app

log = logging.getLogger(__name__)

# The moments the lower apps tell, and what each carries.
MOMENTS = {
    "run_finished": "a run ended (its id)",
    "run_stalled": "a live run made no progress (its id, what was seen)",
    "readiness_grid_failed": "a scheduled readiness grid ended with a check that did not pass (its id)",
    "disk_full": "a host's watched filesystem filled up (its event's id)",
}

_listeners: dict[str, list[str]] = {}


def listen(moment: str, task: str) -> None:
    """Have Celery task `task` (by name) hear `moment` with its arguments."""
    if moment not in MOMENTS:
        raise ValueError(f"unknown moment {moment!r}: one of {', '.join(sorted(MOMENTS))}")
    if task not in _listeners.setdefault(moment, []):
        _listeners[moment].append(task)


def listeners(moment: str) -> list[str]:
    return list(_listeners.get(moment, ()))


def tell(moment: str, *args: object) -> None:
    if moment not in MOMENTS:
        raise ValueError(f"unknown moment {moment!r}")
    for task in _listeners.get(moment, ()):
        try:
            current_app.send_task(task, args)
        except Exception as exc:  # noqa: BLE001 -- whatever the broker raises, the run goes on
            log.warning("alert task %s%r not sent: %s", task, args, exc)

"""Hand an alert-worthy moment to the alerts app's tasks, by name: the run code does not import
the alerts app, and a broker that cannot take the message loses an alert, never a run."""

from __future__ import annotations

import logging

from celery import current_app

log = logging.getLogger(__name__)


def tell(task: str, *args: object) -> None:
    try:
        current_app.send_task(task, args)
    except Exception as exc:  # noqa: BLE001 -- whatever the broker raises, the run goes on
        log.warning("alert task %s%r not sent: %s", task, args, exc)

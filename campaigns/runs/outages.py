"""Riding through database outages: an operation is retried until the database answers.

Finished results wait in memory meanwhile and copies in flight go on. If the outage outlasts
the lease, the next heartbeat finds the run taken over and the driver stops.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from django.db import DatabaseError, close_old_connections, connection

from campaigns.models import Run
from collectors.events import log_event

log = logging.getLogger(__name__)
T = TypeVar("T")
MAX_DELAY = 10.0


def retrying(run_id: int, operation: Callable[..., T], *args, **kwargs) -> T:
    delay = 0.5
    began = None
    while True:
        try:
            result = operation(*args, **kwargs)
        except DatabaseError as exc:
            began = began or time.monotonic()
            log.warning("run %s: database unavailable (%s); retrying in %.1fs", run_id, exc, delay)
            close_old_connections()
            try:
                connection.close()
            except DatabaseError:
                pass
            time.sleep(delay)
            delay = min(delay * 2, MAX_DELAY)
            continue
        if began is not None:
            _rode_through(run_id, time.monotonic() - began)
        return result


def _rode_through(run_id: int, seconds: float) -> None:
    """Put the outage on the run's record: its figures around that time are explained by it."""
    summary = f"Database unavailable for {seconds:.0f} s; the run rode through it"
    try:
        log_event("run_incident", summary, run=Run(pk=run_id))
    except DatabaseError:
        log.warning("run %s: the database is back but the outage could not be recorded", run_id)

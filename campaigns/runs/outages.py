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

log = logging.getLogger(__name__)
T = TypeVar("T")
MAX_DELAY = 10.0


def retrying(run_id: int, operation: Callable[..., T], *args, **kwargs) -> T:
    delay = 0.5
    while True:
        try:
            return operation(*args, **kwargs)
        except DatabaseError as exc:
            log.warning("run %s: database unavailable (%s); retrying in %.1fs", run_id, exc, delay)
            close_old_connections()
            try:
                connection.close()
            except DatabaseError:
                pass
            time.sleep(delay)
            delay = min(delay * 2, MAX_DELAY)

"""Framework tasks: a round-trip probe for health checks and tests, and retention."""

from __future__ import annotations

import os
import socket

from celery import shared_task


@shared_task(name="storageops.ping", soft_time_limit=10, time_limit=20)
def ping(payload: str = "") -> dict:
    """Echo back with the worker's identity, so a caller knows which process answered."""
    return {"pong": payload, "host": socket.gethostname(), "pid": os.getpid()}


@shared_task(name="storageops.retention", soft_time_limit=3000, time_limit=3300)
def retention() -> dict:
    from storageops import retention as passes

    return passes.apply()

"""Who drives a run: a lease (executor + heartbeat) taken and renewed with conditional UPDATEs.

A driver that goes silent for longer than the lease loses the run to the next worker that
asks, which resumes it from its rows alone. No row locks: a lost race is a row count of 0.

Heartbeats are written, and judged, by the database's clock (SQL now()), never a worker's: the
workers run on other hosts, and a worker whose clock ran behind by more than the lease (a
stepped clock, an NTP correction, a host without NTP) wrote heartbeats that every other worker
read as stale, and had its live run taken from it; one ahead held a dead driver's run for as
long as its clock was ahead.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Q
from django.db.models.functions import Now

from campaigns.choices import ACTIVE_RUN_STATES
from campaigns.models import Run
from campaigns.runs.starting import dispatch


def lease_holder_id() -> str:
    """The id a driver holds a lease by (host:pid:nonce), written to the rows' `executor` column."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _lease_cutoff():
    """The heartbeat older than which a lease is free, as an SQL expression (the database's clock)."""
    return Now() - timedelta(seconds=settings.STORAGEOPS_RUN_LEASE_SECONDS)


def acquire_lease(run_id: int, executor: str) -> bool:
    """Take the run if nobody holds a fresh lease on it (a conditional UPDATE: no locks)."""
    return bool(
        Run.objects.filter(pk=run_id, state__in=ACTIVE_RUN_STATES)
        .filter(Q(executor="") | Q(heartbeat_at__lt=_lease_cutoff()) | Q(executor=executor))
        .update(executor=executor, heartbeat_at=Now())
    )


def renew_lease(run_id: int, executor: str, **fields) -> bool:
    """Heartbeat (and progress fields); False means another driver took the run over."""
    return bool(Run.objects.filter(pk=run_id, executor=executor).update(heartbeat_at=Now(), **fields))


#: Seconds a driver's clock may differ from the database's before its run is told.
CLOCK_SKEW_SECONDS = 2.0


def clock_skew_seconds(tries: int = 3) -> float:
    """This host's clock minus the database's (positive: ahead), at least as far off as this
    (0 when the round trips cannot tell it from their own length): the copies' start and end
    times are this host's, the leases the database's. The shortest of a few round trips is
    used; on a loaded machine one can take seconds, and the database's reading falls anywhere
    within it."""
    best = None
    for _ in range(tries):
        before = time.time()
        with connection.cursor() as cursor:
            cursor.execute("SELECT extract(epoch FROM clock_timestamp())")
            database = float(cursor.fetchone()[0])
        after = time.time()
        if best is None or after - before < best[1]:
            best = ((before + after) / 2 - database, after - before)
    skew, round_trip = best
    margin = round_trip / 2
    return 0.0 if abs(skew) <= margin else skew - margin if skew > 0 else skew + margin


def stale_run_ids() -> list[int]:
    """Runs that should be moving but whose driver is silent (or that no driver picked up)."""
    cutoff = _lease_cutoff()
    return list(
        Run.objects.filter(state__in=ACTIVE_RUN_STATES)
        .filter(Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, created__lt=cutoff))
        .values_list("pk", flat=True)
    )


def recover_stale_runs() -> list[int]:
    ids = stale_run_ids()
    for run_id in ids:
        dispatch(run_id)
    return ids

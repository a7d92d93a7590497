"""Outages of the broker and the database, each put on the event log once, with its start and end.

A run rides through both (campaigns.runs.outages retries; a lost Celery message is found again
by recover_runs), so nothing else would say they happened: the database's outage reached the
log only as each run's own incident, and the broker's not at all (a soak killed Redis: no
trace). One watcher in the site's main worker probes both every few seconds; when one that
did not answer answers again, it logs one event dated at the outage's start, its end and
length in the detail. The database's event is written once it is back, which is the first
moment anything can be written.

Several main workers would each see the same outage: the second finds the first's event (same
what, a start within a few probes) and logs nothing.

An outage shorter than the probes' interval (Redis SIGKILLed and started again within a
second, or a probe slowed by the other server being down) is found all the same: each probe
also reads which instance of the server answered (Redis's run_id, PostgreSQL's postmaster
start time), and a new instance between two good probes is an outage between them.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import DatabaseError, close_old_connections, connection
from django.utils import timezone

from collectors.choices import EventKind, EventSource
from collectors.events import log_event
from collectors.models import Event

log = logging.getLogger(__name__)

#: Seconds between probes: an outage shorter than this may go unseen.
INTERVAL = 2.0
LABELS = {"broker": "Broker (Redis) unreachable", "database": "Database unreachable"}


@dataclass(frozen=True)
class Answer:
    """A probe's answer: why the server did not answer (None: it did), and which instance of it
    answered (changes when the server is started again)."""

    error: str | None
    instance: str | None = None


def probe_broker(url: str | None = None) -> Answer:
    """The broker (the configured one, or the one at ``url``): its run_id, or why it did not answer.

    A plain Redis PING, not a kombu connection: one opened from this thread of a worker while
    the broker was down left the consumer's channel without its client, and the worker died
    of it ("Unrecoverable error: AttributeError ... 'hostname'") instead of reconnecting."""
    import redis
    from django.conf import settings

    client = redis.Redis.from_url(url or settings.CELERY_BROKER_URL, socket_connect_timeout=INTERVAL,
                                  socket_timeout=INTERVAL)  # fmt: skip
    try:
        run_id = client.info("server").get("run_id")
    except redis.RedisError as exc:
        return Answer(str(exc)[:300] or type(exc).__name__)
    finally:
        client.close()
    return Answer(None, str(run_id) if run_id else None)


def probe_database() -> Answer:
    from storageops.health import check_database

    result = check_database()
    if result["ok"]:
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_postmaster_start_time()")
                return Answer(None, str(cursor.fetchone()[0]))
        except DatabaseError as exc:
            result = {"error": str(exc)[:300] or type(exc).__name__}
    # A connection the server dropped stays broken until closed: the next probe opens a new one.
    try:
        connection.close()
    except DatabaseError:
        pass
    return Answer(result["error"])


@dataclass
class _Down:
    since: datetime
    error: str


class OutageWatch:
    """Probes each of ``probes`` on every ``tick``; an outage over is logged by ``record``."""

    def __init__(
        self,
        probes: dict[str, Callable[[], Answer]] | None = None,
        clock: Callable[[], datetime] = timezone.now,
    ) -> None:
        self.probes = probes if probes is not None else {"broker": probe_broker, "database": probe_database}
        self.clock = clock
        self.down: dict[str, _Down] = {}
        self.answered: dict[str, tuple[datetime, str]] = {}  # what -> (last good probe, instance)

    def tick(self) -> list[Event]:
        """Probe once; returns the events logged (outages that just ended)."""
        logged = []
        for what, probe in self.probes.items():
            answer = probe()
            now = self.clock()
            if answer.error is not None:
                if what not in self.down:
                    log.warning("%s: %s", LABELS[what], answer.error)
                    self.down[what] = _Down(now, answer.error)
                continue
            last = self.answered.get(what)
            if answer.instance is not None:
                self.answered[what] = (now, answer.instance)
            if what not in self.down and last is not None and answer.instance not in (None, last[1]):
                # Started again between two good probes: down for part of that time, unseen.
                self.down[what] = _Down(
                    last[0], f"restarted between two probes (instance {last[1]} -> {answer.instance})"
                )
            outage = self.down.get(what)
            if outage is None:
                continue
            try:
                event = record_outage(what, outage.since, now, outage.error)
            except DatabaseError:
                continue  # the database went (again) meanwhile: kept, tried on the next tick
            del self.down[what]
            if event is not None:
                logged.append(event)
        return logged

    def run_forever(self, stop: threading.Event, interval: float = INTERVAL) -> None:
        while not stop.wait(interval):
            try:
                self.tick()
            except Exception:  # a watcher that dies would hide the next outage
                log.exception("outage watch tick failed")
            finally:
                close_old_connections()


def record_outage(what: str, began: datetime, ended: datetime, error: str = "") -> Event | None:
    """One event for one outage (None if another watcher logged it already)."""
    label = LABELS[what]
    near = timedelta(seconds=3 * INTERVAL + 5)
    if Event.objects.filter(
        kind=EventKind.RUN_INCIDENT, summary__startswith=label, time__range=(began - near, began + near)
    ).exists():
        return None
    seconds = (ended - began).total_seconds()
    detail = {"outage": what, "start": began.isoformat(), "end": ended.isoformat(), "seconds": round(seconds, 1),
              "error": error[:300]}  # fmt: skip
    return log_event(
        EventKind.RUN_INCIDENT,
        f"{label} for {seconds:.0f} s (from {began:%H:%M:%S} to {ended:%H:%M:%S} UTC); runs rode through it",
        source=EventSource.STORAGEOPS,
        time=began,
        detail=json.dumps(detail),
    )


_stop: threading.Event | None = None


def start_watch() -> None:
    """The watcher in a daemon thread of this process (once)."""
    global _stop
    if _stop is not None:
        return
    _stop = threading.Event()
    threading.Thread(target=OutageWatch().run_forever, args=(_stop,), name="outage-watch", daemon=True).start()


def stop_watch() -> None:
    if _stop is not None:
        _stop.set()

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

The watcher keeps what it knows (what is down since when, the last instance that answered) in a
small file under VAR_DIR/run: a worker killed during an outage, started again by its supervisor,
takes it up and logs the outage when it ends, as the one killed would have. Knowledge older than
CARRY_SECONDS is not taken up: a site stopped for a day did not watch its database meanwhile.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from django.db import DatabaseError, close_old_connections, connection
from django.utils import timezone

from collectors.choices import EventKind, EventSource
from collectors.events import log_event
from collectors.models import Event

log = logging.getLogger(__name__)

#: Seconds between probes: an outage shorter than this may go unseen.
INTERVAL = 2.0
#: How old a stopped watcher's knowledge may be and still be taken up by the next one.
CARRY_SECONDS = 300.0
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
        memory: Path | None = None,
    ) -> None:
        """``memory``: the file what the watcher knows is kept in, taken up from there when
        recent (None: kept in this object only)."""
        self.probes = probes if probes is not None else {"broker": probe_broker, "database": probe_database}
        self.clock = clock
        self.memory = memory
        self.down: dict[str, _Down] = {}
        self.answered: dict[str, tuple[datetime, str]] = {}  # what -> (last good probe, instance)
        if memory is not None:
            self._recall(memory)

    def _recall(self, memory: Path) -> None:
        try:
            saved = json.loads(memory.read_text())
            if (self.clock() - datetime.fromisoformat(saved["saved"])).total_seconds() > CARRY_SECONDS:
                return
            down = {w: _Down(datetime.fromisoformat(d["since"]), str(d["error"])) for w, d in saved["down"].items()}
            answered = {w: (datetime.fromisoformat(at), str(inst)) for w, (at, inst) in saved["answered"].items()}
        except (OSError, ValueError, KeyError, TypeError):
            return
        known = set(self.probes)
        self.down = {w: d for w, d in down.items() if w in known}
        self.answered = {w: a for w, a in answered.items() if w in known}
        if self.down:
            log.warning("outage watch takes up outages under way: %s", ", ".join(sorted(self.down)))

    def _remember(self) -> None:
        if self.memory is None:
            return
        state = {
            "saved": self.clock().isoformat(),
            "down": {w: {"since": d.since.isoformat(), "error": d.error} for w, d in self.down.items()},
            "answered": {w: [at.isoformat(), inst] for w, (at, inst) in self.answered.items()},
        }
        try:
            self.memory.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.memory.with_name(f"{self.memory.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(state))
            tmp.replace(self.memory)
        except OSError:
            log.warning("outage watch could not keep its state in %s", self.memory, exc_info=True)

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
        self._remember()
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
_thread: threading.Thread | None = None


def start_watch() -> None:
    """The watcher in a daemon thread of this process (once)."""
    global _stop, _thread
    if _stop is not None:
        return
    _stop = threading.Event()
    watch = OutageWatch(memory=memory_file())
    _thread = threading.Thread(target=watch.run_forever, args=(_stop,), name="outage-watch", daemon=True)
    _thread.start()


def stop_watch(timeout: float = 5.0) -> None:
    """End the watcher (a worker shutting down): a probe begun against servers the site is
    stopping would log their going as an outage. Nothing to do where none was started."""
    if _stop is None or _thread is None:
        return
    _stop.set()
    _thread.join(timeout=timeout)


def memory_file() -> Path:
    """Where this deployment's watcher keeps what it knows: named by the servers it watches (the
    broker's URL, the database's host, port and name) and its queue prefix, so that a watcher of
    other servers never takes up their instances as its own."""
    from django.conf import settings

    db = connection.settings_dict
    watched = "\n".join(
        [settings.CELERY_BROKER_URL, str(db.get("HOST")), str(db.get("PORT")), str(db.get("NAME")),
         settings.STORAGEOPS_QUEUE_PREFIX]
    )  # fmt: skip
    key = hashlib.sha256(watched.encode()).hexdigest()[:16]
    return Path(settings.VAR_DIR) / "run" / f"outage-watch-{key}.json"

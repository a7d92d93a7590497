"""A client's side of a client pool: copy the share of a run the driver hands it.

Runs as the serve task on the client's own queue (client.NAME). It builds the same copier
the driver would (credentials read from the database), keeps a copy pool the size of its
share, pops a job only when a thread is free (so what waits in its list is unstarted and the
driver may take it back), pushes each result to the driver, and beats: a key that expires
when it dies, and what it has under way. It stops when the driver says stop, or when the
driver has not been heard of for DRIVER_SECONDS (its copies are aborted: the next drive
requeues them). Each beat also names every job it holds (taken from its list, result not yet
pushed), so a driver whose broker restarted empty knows which results were lost with it.
"""

from __future__ import annotations

import json
import logging
import os
import time

from campaigns.models import Run
from campaigns.runs import storage
from campaigns.runs.client_pool import channel
from campaigns.runs.executors.copy_threads import CopyThreads
from campaigns.runs.executors.deadline import DEADLINE_GRACE
from campaigns.spec import RunSpec
from collectors.probes.procfs import net_counters

log = logging.getLogger(__name__)

LOOP_WAIT = 0.02  # how long an idle round waits for a result before it asks for work again
DEADLINE_CHECK_SECONDS = 0.5


def cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


class ClientServer:
    def __init__(self, run_id: int, drive: str, client: str, *, copier=None) -> None:
        self.client = client
        self.keys = channel.Keys(run_id, drive)
        self.conn = channel.connect()
        run = Run.objects.get(pk=run_id)
        spec = RunSpec.of(run)
        self.pool = CopyThreads(copier or storage.for_run(run.snapshot), deadline=spec.timeout + DEADLINE_GRACE)
        self.share = 0
        self.step: int | None = None
        self.gate = ""
        self.aborts = "0"
        self.stopping = False
        self.cpu0, self.nic0 = cpu_seconds(), net_counters()
        self.copied = 0
        self.holding: set[int] = set()  # job ids taken from the list whose result is not yet pushed
        self.last_beat = self.last_deadline = 0.0
        self.driver_seen = time.monotonic()

    def serve(self) -> dict:
        log.info("client %s serving %s", self.client, self.keys.base)
        try:
            while not self._done():
                self._round()
        finally:
            self.pool.close(timeout=2.0)
            # A last beat with everything counted, for the run's record of what this client used.
            self._beat(time.monotonic(), final=True)
            self.conn.delete(self.keys.alive(self.client))
        return {"client": self.client, "copied": self.copied, "cpu_seconds": round(cpu_seconds() - self.cpu0, 3)}

    def _done(self) -> bool:
        busy = self.pool.copying() or self.pool.waiting() or self.pool.ready()
        return self.stopping and not busy

    def _round(self) -> None:
        now = time.monotonic()
        if now - self.last_beat >= channel.BEAT_SECONDS:
            self.last_beat = now
            self._beat(now)
        self._obey(self.conn.hgetall(self.keys.control(self.client)))
        if now - self.last_deadline >= DEADLINE_CHECK_SECONDS:
            self.last_deadline = now
            self.pool.enforce_deadlines()
        if not self.stopping:
            self._take_work()
        got = self.pool.collect(LOOP_WAIT)
        if got:
            self.copied += len(got)
            self.conn.rpush(self.keys.results, *[channel.encode_result(r, self.client) for r in got])
            self.conn.expire(self.keys.results, channel.KEY_TTL)
            self.holding.difference_update(r.job.id for r in got)

    def _obey(self, raw: dict[bytes, bytes]) -> None:
        control = channel.decoded(raw)
        if not control:
            return
        share, step = int(control.get("concurrency", 0)), int(control.get("step", -1))
        if share != self.share:
            self.share = share
            self.pool.resize(share)
        self.step = step
        gate = control.get("gate", "")
        if gate != self.gate:
            self.gate = gate
            self.pool.hold() if gate.startswith("hold") else self.pool.release()
        aborts = control.get("aborts", "0")
        if aborts != self.aborts:
            self.aborts = aborts
            self.pool.cancel_running()
        if control.get("stop") == "1" and not self.stopping:
            self.stopping = True
            self.pool.cancel_running()

    def _take_work(self) -> None:
        free = self.share - self.pool.copying() - self.pool.waiting() - self.pool.ready()
        if free <= 0:
            return
        raw = self.conn.lpop(self.keys.jobs(self.client), free)
        if not raw:
            return
        jobs = [channel.decode_job(text) for text in raw]
        self.holding.update(job.id for job in jobs)
        if any(job.step != self.step for job in jobs):
            # Jobs of a step whose control this round read before the driver wrote it: its share
            # and gate are read again before they start.
            self._obey(self.conn.hgetall(self.keys.control(self.client)))
        self.pool.submit(jobs)

    def _beat(self, now: float, final: bool = False) -> None:
        if self.conn.exists(self.keys.driver):
            self.driver_seen = now
        elif now - self.driver_seen >= channel.DRIVER_SECONDS and not self.stopping:
            log.warning("client %s: the driver of %s is gone; stopping", self.client, self.keys.base)
            self.stopping = True
            self.pool.cancel_running()
        nic = {
            name: [rx - self.nic0.get(name, (0, 0))[0], tx - self.nic0.get(name, (0, 0))[1]]
            for name, (rx, tx) in net_counters().items()
        }
        state = {
            "copying": self.pool.copying(),
            "held": self.pool.ready(),
            "in_flight": json.dumps(self.pool.in_flight()),
            "holding": json.dumps(sorted(self.holding)),
            "cpu_seconds": round(cpu_seconds() - self.cpu0, 3),
            "nic": json.dumps(nic),
            "copied": self.copied,
            "final": int(final),
        }
        pipe = self.conn.pipeline(transaction=False)
        pipe.set(self.keys.alive(self.client), "1", px=int(channel.ALIVE_SECONDS * 1000))
        pipe.hset(self.keys.state(self.client), mapping=state)
        pipe.expire(self.keys.state(self.client), channel.KEY_TTL)
        pipe.execute()


def serve(run_id: int, drive: str, client: str) -> dict:
    return ClientServer(run_id, drive, client).serve()

"""The client-pool executor: the run's copies spread over client hosts (campaigns.runs.client_pool).

The driver side of the channel. It splits each step's concurrency over the clients that
answered, by weight, hands each client jobs up to its share (and one waiting, so a free thread
starts the next copy at once), and records what the clients send back, as the copy pool
executor records its threads' results: one thread, batched writes, the driver's lease.

A client whose heartbeat expires is lost: its waiting jobs are taken back, the copies it had
under way keep the lost copy in their history, and all of them go to the clients left, whose
shares grow to keep the step's concurrency. A result is accepted only from the client the job
was handed to, so a job re-planned elsewhere is recorded once, whatever its first client did.

A broker restarted empty takes every list, hash and beat of the channel with it. The driver
sees its epoch key gone, writes the clients' shares again, gives them time to beat before any
is judged lost, and, from each client's first beat after it (the jobs it still holds) and the
results that reached the new list, re-plans the jobs whose waiting place or result was lost.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time

from celery import current_app
from django.conf import settings

from campaigns.runs import store
from campaigns.runs.client_pool import channel, shares
from campaigns.runs.engines.copies import CopyJob, CopyOptions
from campaigns.runs.executors.base import Collected, ExecutorFailed
from campaigns.runs.executors.in_process import START_TOGETHER_WAIT
from campaigns.runs.executors.recording import Recorder
from campaigns.runs.outages import retrying
from campaigns.spec import RunSpec
from collectors.choices import EventKind
from collectors.events import log_event

log = logging.getLogger(__name__)

IDLE_WAIT = 0.02
HOLD_POLL = 0.1  # how often the clients' state is read while a step waits to start together
SERVE_TASK = "campaigns.client_serve"
FINAL_WAIT = 5.0  # how long the end of a run waits for its clients' last beats
# The driver's beat comes from a thread of its own: the driver's loop may wait minutes on a
# database outage (it rides through it), and clients that heard nothing for DRIVER_SECONDS
# would stop and be taken for lost when it came back. A loop silent this long is stuck, not
# waiting: its beat stops and its clients stop too.
LOOP_SILENCE_SECONDS = 900.0
# After the broker came back empty, how long the clients have to beat again before one is lost:
# their connections retry with a back-off of up to 2 s.
REJOIN_SECONDS = 2 * channel.ALIVE_SECONDS


def drive_token(lease_holder: str) -> str:
    return hashlib.sha1(lease_holder.encode()).hexdigest()[:12]  # noqa: S324 - a name, not a secret


def _usage(state: dict[str, str]) -> dict:
    """What a client's beat says its worker used: CPU seconds, and bytes per interface."""
    return {"cpu_seconds": float(state.get("cpu_seconds", 0)), "nic": json.loads(state.get("nic", "{}"))}


class ClientPoolExecutor:
    batch_size = 1 << 30
    min_claim = 1
    prefetch = 1  # jobs waiting in each client's list beyond its share

    def __init__(self, run, *, lease_holder: str) -> None:
        self.run_obj, self.run_id = run, run.pk
        self.spec = spec = RunSpec.of(run)
        self.lease_holder = lease_holder
        self.keys = channel.Keys(run.pk, drive_token(lease_holder))
        self.weights = {c.name: c.weight for c in spec.clients}
        self.recorder = Recorder(run.pk, spec, lease_holder)
        self.base_options = CopyOptions.from_spec(spec)
        self.conn = None
        self.live: list[str] = []
        self.lost: dict[str, str] = {}
        self.assigned: dict[int, tuple[str, CopyJob]] = {}
        self.started: dict[int, float] = {}  # job id -> epoch its copy began, as its client said
        self.replan: list[CopyJob] = []
        self.states: dict[str, dict] = {}
        self.usage: dict[str, dict] = {}
        self.share_of: dict[str, int] = {}
        self.step, self.concurrency = -1, 0
        self.gate_held_since: float | None = None
        self.aborts = 0
        self.last_beat = self.last_state = 0.0
        self.judge_after = 0.0  # monotonic time before which no client is judged lost
        self.rebuilding: set[str] = set()  # clients whose jobs are checked at their first beat after a restart
        # What the rebuild after an empty broker found, said once when every client has beaten.
        self.rebuilt: dict | None = None
        self.handed_before: set[int] = set()  # the jobs handed out when the broker was found empty
        self.broker_restarts = 0
        self.loop_seen = time.monotonic()  # the driver's loop last asked for results
        self.beating: threading.Event | None = None  # set to stop the beat thread

    # -- joining ------------------------------------------------------------------------------
    def _join(self) -> None:
        try:
            self.conn = channel.connect()
            self._driver_beat()
            self.conn.set(self.keys.epoch, self.lease_holder, ex=channel.KEY_TTL)
            self._start_beating()
        except (channel.PoolUnavailable, channel.redis.RedisError) as exc:
            raise ExecutorFailed(f"The client pool cannot be reached: {exc}") from exc
        wait = settings.STORAGEOPS_CLIENT_JOIN_SECONDS
        prefix = settings.STORAGEOPS_QUEUE_PREFIX
        for name in self.weights:
            current_app.send_task(
                SERVE_TASK, args=[self.run_id, drive_token(self.lease_holder), name],
                queue=f"{prefix}client.{name}", expires=wait + 5,
            )  # fmt: skip
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and len(self._answering()) < len(self.weights):
            self._driver_beat()
            time.sleep(0.2)
        self.live = sorted(self._answering())
        silent = [name for name in self.weights if name not in self.live]
        for name in silent:
            self.lost[name] = f"did not answer within {wait} s"
        if not self.live:
            raise ExecutorFailed(
                f"No client of the pool answered within {wait} s ({', '.join(self.weights)}): "
                "is `manage.py client --host NAME` running on each?"
            )
        if silent:
            self._incident(f"Clients {', '.join(silent)} did not answer within {wait} s; the run goes on with "
                           f"{', '.join(self.live)}")  # fmt: skip

    def _driver_beat(self) -> None:
        """Say the driver is here: its clients stop DRIVER_SECONDS after the last of these."""
        self.conn.set(self.keys.driver, self.lease_holder, px=int(channel.DRIVER_SECONDS * 1000))

    def _start_beating(self) -> None:
        self.beating = stop = threading.Event()

        def beat() -> None:
            while not stop.wait(1.0) and time.monotonic() - self.loop_seen < LOOP_SILENCE_SECONDS:
                try:
                    self._driver_beat()
                except channel.redis.RedisError as exc:  # the broker away: the next beat tries again
                    log.info("run %s: driver beat not sent (%s)", self.run_id, exc)

        threading.Thread(target=beat, name=f"pool-beat-{self.run_id}", daemon=True).start()

    def _stop_beating(self) -> None:
        if self.beating is not None:
            self.beating.set()

    def _answering(self) -> list[str]:
        names = list(self.weights)
        pipe = self.conn.pipeline(transaction=False)
        for name in names:
            pipe.exists(self.keys.alive(name))
        return [name for name, alive in zip(names, pipe.execute(), strict=True) if alive]

    # -- the executor interface --------------------------------------------------------------------
    def resume(self) -> str:
        orphans = retrying(self.run_id, store.requeue_orphans, self.run_id)
        return f"{orphans} in-flight transfers requeued for a retry"

    def on_step(self, index: int, concurrency: int) -> None:
        if self.conn is None:
            self._join()
        self.step, self.concurrency = index, concurrency
        hold = self.spec.start_together
        self.gate_held_since = time.monotonic() if hold else None
        self._share_out(gate=f"{'hold' if hold else 'open'}:{index}")

    def _share_out(self, gate: str | None = None) -> None:
        self.share_of = shares.split(self.concurrency, {name: self.weights[name] for name in self.live})
        for name, share in self.share_of.items():
            if share == 0:
                # A client with no share this step never takes a job, so nothing may wait in its
                # list. Steps end with their jobs started (or given back), so none should; were one
                # left, the run would wait for it for ever: it goes to the others.
                self._take_back(name)
        pipe = self.conn.pipeline(transaction=False)
        for name, share in self.share_of.items():
            fields = {"concurrency": share, "step": self.step, "aborts": self.aborts}
            if gate is not None:
                fields["gate"] = gate
            pipe.hset(self.keys.control(name), mapping=fields)
            pipe.expire(self.keys.control(name), channel.KEY_TTL)
        pipe.execute()

    def _handed(self) -> dict[str, int]:
        counts = dict.fromkeys(self.live, 0)
        for name, _ in self.assigned.values():
            if name in counts:
                counts[name] += 1
        return counts

    def _room(self, handed: dict[str, int]) -> dict[str, int]:
        """How many more jobs each live client with a share may hold: its share and one waiting."""
        return {n: self.share_of[n] + self.prefetch - handed[n] for n in self.live if self.share_of.get(n)}

    def room(self, concurrency: int) -> int:
        free = sum(max(r, 0) for r in self._room(self._handed()).values())
        return max(free - len(self.replan), 0)

    def submit(self, jobs: list[CopyJob], step: int) -> None:
        if self.spec.sweep:
            options = self.base_options.at(self.spec.point_of(step))
            for job in jobs:
                job.options = options
        self.replan.extend(jobs)
        self._hand_out()

    def _hand_out(self) -> None:
        """Give waiting jobs to the clients with the most room, up to their share and one more."""
        handed = self._handed()
        batches: dict[str, list[CopyJob]] = {}
        while self.replan:
            room = self._room(handed)
            if not room or max(room.values()) <= 0:
                break
            name = max(sorted(room), key=lambda n: room[n])
            job = self.replan.pop(0)
            self.assigned[job.id] = (name, job)
            handed[name] += 1
            batches.setdefault(name, []).append(job)
        if batches:
            pipe = self.conn.pipeline(transaction=False)
            for name, batch in batches.items():
                pipe.rpush(self.keys.jobs(name), *[channel.encode_job(job) for job in batch])
                pipe.expire(self.keys.jobs(name), channel.KEY_TTL)
            pipe.execute()

    def collect(self, now: float, *, idle: bool, stopping: bool) -> Collected:
        if self.conn is None:
            return Collected()  # the pool was never reached: nothing was handed out
        if not self.live and self.replan:
            # Raised before anything is read, so no result already recorded is left uncounted.
            raise ExecutorFailed(f"Every client of the pool was lost: {self._lost_text()}")
        mono = self.loop_seen = time.monotonic()
        holding = self.gate_held_since is not None
        fresh: list[str] = []
        if mono - self.last_state >= (HOLD_POLL if holding else channel.BEAT_SECONDS):
            self.last_state = mono
            fresh = self._read_states(mono)
        if holding:
            self._release_when_ready(mono)
        out = Collected()
        got = self._results()
        if fresh:
            # After the states were read: a result pushed before a client's beat is in `got`.
            self._rebuild(fresh)
        self._report_rebuild()
        if not got and idle:
            time.sleep(IDLE_WAIT)
        self.recorder.add(got, out)
        if self.replan and self.live:
            self._hand_out()
        self.recorder.flush(now, out, stopping=stopping)
        return out

    def _results(self) -> list:
        pipe = self.conn.pipeline(transaction=True)
        pipe.lrange(self.keys.results, 0, 999)
        pipe.ltrim(self.keys.results, 1000, -1)
        raw, _ = pipe.execute()
        got = []
        for text in raw:
            data = channel.decode_result(text)
            held = self.assigned.get(int(data["id"]))
            if held is None or held[0] != data.get("client"):
                # The result of a copy re-planned elsewhere (its client was given up): the
                # transfer is recorded once, from the client it was handed to last.
                log.info("run %s: result of %s from %s dropped", self.run_id, data.get("id"), data.get("client"))
                continue
            del self.assigned[int(data["id"])]
            self.started.pop(int(data["id"]), None)
            got.append(channel.result_for(held[1], data))
        return got

    def _read_states(self, mono: float) -> list[str]:
        """Read every live client's beat; lose those silent too long. Returns the clients whose
        jobs are to be checked now: their first beat since the broker came back empty."""
        pipe = self.conn.pipeline(transaction=False)
        pipe.exists(self.keys.epoch)
        for name in self.live:
            pipe.exists(self.keys.alive(name))
            pipe.hgetall(self.keys.state(name))
        epoch, *replies = pipe.execute()
        if not epoch:
            self._broker_emptied(mono)
            return []
        fresh = []
        for i, name in enumerate(list(self.live)):
            alive, state = replies[2 * i], channel.decoded(replies[2 * i + 1])
            if state and name in self.rebuilding:
                fresh.append(name)  # the state hash went with the broker: this one is new
            if state:
                self.states[name] = state
                self.usage[name] = _usage(state)
                for pk, at in json.loads(state.get("in_flight", "[]")):
                    if self.assigned.get(pk, ("",))[0] == name:
                        self.started.setdefault(pk, at)
            if not alive and mono >= self.judge_after:
                self._lose(name, f"no heartbeat for {channel.ALIVE_SECONDS:.0f} s")
        return [name for name in fresh if name in self.live]

    def _broker_emptied(self, mono: float) -> None:
        """The broker restarted empty: say the driver is here, give the clients their shares again
        and time to beat before any is lost. Jobs that reached a list since are taken back and
        the clients' states dropped, so the first state read afterwards is a beat written after
        this moment: a job handed before it that the beat does not hold, whose result has not
        come, is lost (its result is pushed before it leaves the client's holding)."""
        self.broker_restarts += 1
        self.conn.set(self.keys.epoch, self.lease_holder, ex=channel.KEY_TTL)
        self._driver_beat()
        for name in self.live:
            self._take_back(name)
            self.conn.delete(self.keys.state(name))
        self.judge_after = mono + REJOIN_SECONDS
        self.rebuilding = set(self.live)
        # Emptied again before every client beat: one account of both.
        self.rebuilt = self.rebuilt or {"gone": 0, "began": 0, "clients": []}
        self.handed_before = set(self.assigned)
        self.states = {}
        self._share_out(gate=f"{'hold' if self.gate_held_since is not None else 'open'}:{self.step}")
        log.warning("run %s: the broker came back empty; rebuilding the pool's channel", self.run_id)

    def _rebuild(self, fresh: list[str]) -> None:
        """Jobs handed to these clients before the broker came back that they no longer hold and
        whose result did not come: their place in a list or their result went with the broker.
        They are handed out again."""
        holds = {name: set(json.loads(self.states[name].get("holding", "[]"))) for name in fresh}
        gone = [
            (pk, job) for pk, (name, job) in self.assigned.items()
            if name in holds and pk in self.handed_before and pk not in holds[name]
        ]  # fmt: skip
        for pk, _ in gone:
            del self.assigned[pk]
        began = [(pk, self.started.pop(pk)) for pk, _ in gone if pk in self.started]
        self.replan = [job for _, job in sorted(gone)] + self.replan
        self.rebuilding.difference_update(fresh)
        if began:
            message = "the broker (Redis) restarted empty after this copy began: its result was lost; copied again"
            retrying(self.run_id, store.note_lost_copies, self.run_id, self.lease_holder, began, message, "broker_lost")
        if self.rebuilt is not None:
            self.rebuilt["gone"] += len(gone)
            self.rebuilt["began"] += len(began)
            self.rebuilt["clients"] += fresh

    def _report_rebuild(self) -> None:
        """Say once what the broker's empty restart cost, when every live client has beaten since
        (they beat at their own moments: one incident per client read as two losses)."""
        if self.rebuilt is None or self.rebuilding & set(self.live):
            return
        gone, began, clients = self.rebuilt["gone"], self.rebuilt["began"], self.rebuilt["clients"]
        self.rebuilt = None
        if gone:
            self._incident(
                f"The broker (Redis) came back empty: {gone} jobs of {', '.join(sorted(set(clients)))} lost with it "
                f"({began} begun, their results gone; {gone - began} not started) are handed out again"
            )

    def _release_when_ready(self, mono: float) -> None:
        ready = sum(int(self.states.get(n, {}).get("held", 0)) + int(self.states.get(n, {}).get("copying", 0))
                    for n in self.live)  # fmt: skip
        if ready >= self.concurrency or mono - self.gate_held_since >= START_TOGETHER_WAIT:
            self.gate_held_since = None
            pipe = self.conn.pipeline(transaction=False)
            for name in self.live:
                pipe.hset(self.keys.control(name), "gate", f"open:{self.step}")
            pipe.execute()

    def _lose(self, name: str, why: str) -> None:
        """A client gone: its jobs go to the others, and their shares grow to keep the step's."""
        self.live.remove(name)
        self.lost[name] = why
        self.conn.hset(self.keys.control(name), "stop", "1")
        mine = [(pk, job) for pk, (client, job) in self.assigned.items() if client == name]
        waiting = {job.id for job in self._waiting_in(name)}
        # What it had taken from its list it had begun, or was about to: its last beat may be
        # older than its newest copies, so their start is known only where it said so.
        under_way = [(pk, self.started.get(pk)) for pk, _ in mine if pk not in waiting]
        for pk, _ in mine:
            del self.assigned[pk]
            self.started.pop(pk, None)
        self.replan = [job for _, job in sorted(mine)] + self.replan
        message = f"client {name} was lost ({why}) during this copy; it was copied again by another client"
        retrying(self.run_id, store.note_lost_copies, self.run_id, self.lease_holder, under_way, message)
        if self.live:
            self._share_out()
            split = ", ".join(f"{n} {s}" for n, s in self.share_of.items())
            self._incident(
                f"Client {name} lost ({why}): {len(under_way)} copies under way and {len(mine) - len(under_way)} "
                f"waiting re-planned onto {', '.join(self.live)}; step concurrency {self.concurrency} now {split}"
            )
        else:
            self._incident(f"Client {name} lost ({why}): no client of the pool is left")

    def _incident(self, summary: str) -> None:
        retrying(self.run_id, log_event, EventKind.RUN_INCIDENT, summary, run=self.run_obj)

    def _lost_text(self) -> str:
        return "; ".join(f"{name} {why}" for name, why in self.lost.items())

    def outstanding(self) -> int:
        return len(self.assigned) + len(self.recorder.pending) + len(self.replan)

    def unstarted(self, step: int) -> int:
        waiting = sum(1 for pk, (_, job) in self.assigned.items() if job.step == step and pk not in self.started)
        return waiting + sum(1 for job in self.replan if job.step == step)

    def copying(self) -> int:
        return sum(int(self.states.get(n, {}).get("copying", 0)) for n in self.live)

    def in_flight(self) -> list[tuple[int, float]]:
        return [(pk, at) for pk, at in self.started.items() if pk in self.assigned]

    def _waiting_in(self, name: str) -> list[CopyJob]:
        """Empty a client's list at once; the jobs in it were not started."""
        pipe = self.conn.pipeline(transaction=True)
        pipe.lrange(self.keys.jobs(name), 0, -1)
        pipe.delete(self.keys.jobs(name))
        return [channel.decode_job(text) for text in pipe.execute()[0]]

    def _take_back(self, name: str) -> None:
        """A client's waiting jobs back to be handed to the others."""
        jobs = [job for job in self._waiting_in(name) if self.assigned.pop(job.id, None) is not None]
        self.replan = jobs + self.replan

    def give_back_unstarted(self) -> list[CopyJob]:
        back, self.replan = list(self.replan), []
        for name in self.live:
            back.extend(job for job in self._waiting_in(name) if self.assigned.pop(job.id, None) is not None)
        return back

    def cancel(self, abort_running: bool) -> None:
        if abort_running and self.conn is not None and self.live:
            self.aborts += 1
            pipe = self.conn.pipeline(transaction=False)
            for name in self.live:
                pipe.hset(self.keys.control(name), "aborts", self.aborts)
            pipe.execute()

    def close(self) -> None:
        if self.conn is None:
            return
        self._stop_beating()
        try:
            self._read_states(time.monotonic())
            pipe = self.conn.pipeline(transaction=False)
            for name in self.weights:
                pipe.hset(self.keys.control(name), "stop", "1")
                pipe.expire(self.keys.control(name), 3600)
            pipe.execute()
            self._final_usage()
            self.conn.delete(self.keys.driver)
        except channel.redis.RedisError:
            log.exception("run %s: could not tell the clients to stop (they stop when the driver is gone)", self.run_id)

    def _final_usage(self) -> None:
        """Wait a moment for each live client's last beat (sent as its serve task ends), so the
        run records all it used, the last copies' bytes included."""
        deadline = time.monotonic() + FINAL_WAIT
        waiting = set(self.live)
        while waiting and time.monotonic() < deadline:
            for name in list(waiting):
                state = channel.decoded(self.conn.hgetall(self.keys.state(name)))
                if state.get("final") == "1":
                    waiting.discard(name)
                    self.usage[name] = _usage(state)
            if waiting:
                time.sleep(0.1)

    def finish(self) -> dict:
        """Each client's part, for the run's record: its weight, whether it was lost and why, and
        what it used (CPU seconds of its worker, bytes through its interfaces)."""
        clients = {
            name: {"weight": weight, "lost": self.lost.get(name, ""), **self.usage.get(name, {})}
            for name, weight in self.weights.items()
        }
        problems = [f"client {name} lost ({why})" for name, why in self.lost.items()]
        return {"client_pool": clients, "problems": problems} if problems else {"client_pool": clients}

    def crashed(self) -> None:
        self.close()

"""The executor of every engine whose copier copies one file per call in this worker process (gfal2,
XRootD's client): a pool of copy threads (`copy_threads.CopyThreads`) sized to the step's
concurrency, each copy under StorageOps' deadline, its results written back in batches.

Copy threads only copy; this executor, called from the lifecycle's one thread, does every
database write, a share of one batched statement per copy, which is what lets one worker
record thousands of transfers a second. An engine brings its copier (`copy_threads.Copier`)
and gets steps, start-together, deadlines, cancels and the recording from here.
"""

from __future__ import annotations

import time
from collections import Counter

from campaigns.models import Run
from campaigns.runs import store
from campaigns.runs.engines.copies import CopyJob, CopyOptions
from campaigns.runs.executors.base import Collected
from campaigns.runs.executors.copy_threads import Copier, CopyThreads
from campaigns.runs.executors.deadline import DEADLINE_GRACE
from campaigns.runs.executors.recording import Recorder
from campaigns.runs.outages import retrying
from campaigns.spec import RunSpec

IDLE_WAIT = 0.01  # an idle loop waits this long for a result rather than spinning
DEADLINE_CHECK_SECONDS = 0.5
START_TOGETHER_WAIT = 1.0


class CopyThreadsExecutor:
    min_claim_floor = 1

    def __init__(self, run: Run, copier: Copier, *, lease_holder: str) -> None:
        self.run_id = run.pk
        self.spec = spec = RunSpec.of(run)
        self.lease_holder = lease_holder
        self.recorder = Recorder(run.pk, spec, lease_holder)
        self.pool = CopyThreads(copier, deadline=spec.timeout + DEADLINE_GRACE)
        self.base_options = CopyOptions.from_spec(spec)
        self.last_deadline_check = 0.0
        self.start_together = spec.start_together
        self.held_since = 0.0
        self.concurrency = 0
        self.handed = 0
        self.submitted: Counter[int] = Counter()
        self.taken_back: Counter[int] = Counter()

    # A few more jobs queued than threads exist, so a thread that finishes starts the next
    # copy at once instead of waiting for the next claim; the threads alone bound concurrency.
    @property
    def prefetch(self) -> int:
        return min(max(4, self.concurrency // 4), 512)

    @property
    def batch_size(self) -> int:
        return 1 << 30

    @property
    def min_claim(self) -> int:
        return max(self.min_claim_floor, self.prefetch // 4)

    def resume(self) -> str:
        # Copies a dead driver left active had their attempt; they go back to the queue.
        orphans = retrying(self.run_id, store.requeue_orphans, self.run_id)
        return f"{orphans} in-flight transfers requeued for a retry"

    def on_step(self, index: int, concurrency: int) -> None:
        self.concurrency = concurrency
        self.pool.resize(concurrency)
        if self.start_together:
            self.pool.hold()
            self.held_since = time.monotonic()

    def room(self, concurrency: int) -> int:
        return concurrency + self.prefetch - self.handed

    def submit(self, jobs: list[CopyJob], step: int) -> None:
        if self.spec.sweep:
            # Each job carries its step's knobs: a copy still running from the step before keeps its own.
            options = self.base_options.at(self.spec.point_of(step))
            for job in jobs:
                job.options = options
        self.pool.submit(jobs)
        self.handed += len(jobs)
        self.submitted[step] += len(jobs)
        self._release_when_ready()

    def _release_when_ready(self) -> None:
        # Every thread has a job when as many wait as there are threads; a step with fewer
        # files than its concurrency (the end of the plan) starts what it has after a moment.
        if self.pool.holding() and (
            self.pool.ready() + self.pool.copying() >= self.concurrency
            or time.monotonic() - self.held_since >= START_TOGETHER_WAIT
        ):
            self.pool.release()

    def collect(self, now: float, *, idle: bool, stopping: bool) -> Collected:
        # Wait a little only when the last round did nothing: a loop that spins would take
        # the interpreter lock from the copy threads it feeds.
        if now - self.last_deadline_check >= DEADLINE_CHECK_SECONDS:
            self.last_deadline_check = now
            self.pool.enforce_deadlines()
        self._release_when_ready()
        got = self.pool.collect(IDLE_WAIT if idle else 0.0)
        out = Collected()
        self.handed -= len(got)
        self.recorder.add(got, out)
        self.recorder.flush(now, out, stopping=stopping)
        return out

    def outstanding(self) -> int:
        """Jobs handed out and not yet recorded (waiting, copying, or finished in memory)."""
        return self.handed + len(self.recorder.pending)

    def unstarted(self, step: int) -> int:
        return self.submitted[step] - self.taken_back[step] - self.pool.started(step)

    def copying(self) -> int:
        return self.pool.copying()

    def in_flight(self) -> list[tuple[int, float]]:
        return self.pool.in_flight()

    def give_back_unstarted(self) -> list[CopyJob]:
        jobs = self.pool.take_unstarted()
        self.handed -= len(jobs)
        for job in jobs:
            self.taken_back[job.step] += 1
        return jobs

    def cancel(self, abort_running: bool) -> None:
        if abort_running:
            self.pool.cancel_running()

    def close(self) -> None:
        self.pool.close()

    def finish(self) -> dict:
        return {}

    def crashed(self) -> None:
        return None

"""The loop of one drive of a run: what comes back from the executor, cancel and heartbeat,
budgets, the move from step to step, and claiming work for the executor's free room.

One control thread talks to the database: it claims queued transfers, hands them to the
executor, and takes back what finished (the executor writes each attempt into its row, with
the run's counters in the same transaction).
"""

from __future__ import annotations

import enum
import logging
import math
import time
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime

from django.conf import settings
from django.utils import timezone

from campaigns import sweeps
from campaigns.choices import RunState, StepBarrier
from campaigns.models import Run
from campaigns.runs import leases, steps, store
from campaigns.runs.executors import Collected, Executor, ExecutorFailed
from campaigns.runs.outages import retrying
from campaigns.runs.outcome import failure_reason, run_outcome, steps_not_run_reason
from campaigns.runs.starting import current_state
from campaigns.spec import RunSpec
from collectors.choices import EventKind
from collectors.events import log_event
from storageops import alerting

log = logging.getLogger(__name__)

CONTROL_SECONDS = 0.5
THROUGHPUT_WINDOW = 10.0
CLAIM_PAUSE = 0.05  # a claim smaller than the executor's minimum waits this long for company
ABORT_EVERY = 1.0
# After a cancel (or a failure) and its grace, copies are aborted; an engine that still has
# not given them back this much later is left, and its rows are closed as cancelled.
ABANDON_AFTER_ABORT = 30.0


class LeaseLost(Exception):
    """Another driver took the run over; this one must stop writing at once."""


class StopKind(enum.Enum):
    COMPLETED = "completed"  # every planned transfer finished
    SWEPT = "swept"  # the last step ended
    DURATION = "duration budget"
    BYTES = "byte budget"
    CANCELLED = "cancelled"
    FAILED = "failed"


@dataclass(frozen=True)
class Stop:
    kind: StopKind
    reason: str
    # On a stop by time (or cancel), jobs handed out but not started go back to the queue;
    # on a stop by count (files, bytes) they were within the limit and still run.
    give_back: bool = False

    @property
    def state(self) -> str:
        return {StopKind.CANCELLED: RunState.CANCELLED, StopKind.FAILED: RunState.FAILED}.get(
            self.kind, RunState.SUCCEEDED
        )

    @property
    def aborts(self) -> bool:
        return self.kind in (StopKind.CANCELLED, StopKind.FAILED)


@dataclass(frozen=True)
class Outcome:
    state: str
    reason: str
    # Transfers never tried that no step needed (a completed sweep of time-bounded steps): no
    # shortfall, and closed as such.
    not_needed: int = 0


class RunLoop:
    """One drive of a run, stepped by `run()` until the run may finish.

    handed: jobs given to the executor and not yet back (waiting, copying or unrecorded).
    """

    def __init__(self, run: Run, executor: Executor, *, lease_holder: str) -> None:
        self.run_obj, self.executor = run, executor
        self.lease_holder = lease_holder  # the lease holder's id, carried by every row it writes
        self.spec = spec = RunSpec.of(run)
        self.run_started = run.started_at.timestamp()
        self.mean_size = max(run.planned_bytes / max(run.planned_files, 1), 1.0)
        self.step = self._retrying(steps.current_step, run, spec)
        self.step_claimed = self._retrying(steps.claimed_in_step, run.pk, self.step.index)
        self.handed = self.handed_bytes = 0
        self.done, self.failed, self.moved = run.files_done, run.files_failed, run.bytes_done
        self.settled = run.bytes_done
        self.recent: deque[tuple[float, int]] = deque()
        self.last_control = self.last_progress = self.last_claim = self.last_abort = 0.0
        self.queue_empty = False
        self.retries_due = 0.0  # epoch before which no queued transfer is due (all wait for a retry)
        self.draining = False  # the step's time or files are done; its copies are still ending
        self.busy = False
        self.last_result = 0.0
        self.stalled_since: float | None = None
        self.marked: set[int] = set()  # copies under way whose start time is on their row
        self.stop: Stop | None = None
        self.abort_from: float | None = None

    def _retrying(self, operation, *args, **kwargs):
        return retrying(self.run_obj.pk, operation, *args, **kwargs)

    # -- the loop -------------------------------------------------------------------------------
    def run(self) -> None:
        self.enter_step()
        while True:
            now = time.time()
            try:
                self.absorb(self.executor.collect(now, idle=not self.busy, stopping=self.stop is not None))
            except ExecutorFailed as exc:
                # The engine can no longer copy (every client of a pool lost): what it holds goes back.
                if not (self.stop and self.stop.kind == StopKind.FAILED):
                    self.fail(str(exc))
            self.control(now)
            if self.stop is None:
                self.advance(now)
            if self.stop is None:
                self.fill(now)
            if self.stop is None and self.queue_empty and self.executor.outstanding() == 0:
                self.stop = Stop(StopKind.COMPLETED, "all planned transfers finished")
            if self.stop:
                if self.stop.give_back:
                    self.give_back()
                if self.executor.outstanding() == 0:
                    return
                if self.abort_from is not None and now - self.abort_from >= ABANDON_AFTER_ABORT:
                    log.warning("run %s: %d copies not given back after abort", self.run_obj.pk, self.handed)
                    return

    def outcome(self) -> Outcome:
        stop = self.stop or Stop(StopKind.COMPLETED, "")
        run_id, planned = self.run_obj.pk, self.run_obj.planned_files
        # What is neither done nor failed now is closed as skipped once the outcome is decided.
        skipped = max(planned - self.done - self.failed, 0)
        if stop.aborts:
            return Outcome(run_outcome(stop.state, planned, self.done, self.failed, skipped), stop.reason)
        # Once the sweep's last step ended, the files never tried were not needed: time-bounded
        # steps take what their time allows from the pool, file-bounded ones their step_files
        # (and an FTS step its measure_files) of a larger file_count. One tried and waiting for
        # its retry was needed.
        sweep_done = stop.kind == StopKind.SWEPT
        not_needed = self._retrying(store.untried_count, run_id) if sweep_done and skipped else 0
        points = self.spec.points
        ran = self._retrying(steps.steps_run, run_id) if len(points) > 1 else {0}
        not_run = [point.concurrency for index, point in enumerate(points) if index not in ran]
        short = self._short_steps(ran) if not stop.aborts else []
        state = run_outcome(
            stop.state, planned, self.done, self.failed, skipped, not_needed=not_needed,
            steps_not_run=len(not_run) + len(short),
        )  # fmt: skip
        reason = stop.reason
        if state == RunState.FAILED:
            # Failed because nothing succeeded, though the sweep ran to its end: say what failed.
            # A budget that stopped it is still worth saying; "sweep completed" is not.
            errors = store.error_counts(run_id)
            ended = "" if stop.kind in (StopKind.COMPLETED, StopKind.SWEPT) else stop.reason
            reason = failure_reason(planned, self.failed, skipped, errors, ended)
        elif not_run or short:
            if stop.kind == StopKind.COMPLETED:
                # "All planned transfers finished" beside a step that never ran said two things at once.
                reason = "the planned files ran out before the sweep's last steps"
            said = [steps_not_run_reason(not_run, len(points))] if not_run else []
            said += [f"the step at concurrency {c} got {got} of its {want} files" for c, got, want in short]
            reason = "; ".join(filter(None, [reason, *said]))
        return Outcome(state, reason, not_needed)

    def _short_steps(self, ran: set[int]) -> list[tuple[int, int, int]]:
        """Steps bounded by files alone that ran with fewer files than they plan (the pool ran
        out): (concurrency, files got, files planned). A time-bounded step takes what its time
        allows, and is never short."""
        spec = self.spec
        if not spec.step_files or spec.step_seconds or len(spec.points) < 2:
            return []
        got = self._retrying(steps.files_per_step, self.run_obj.pk)
        hook = getattr(self.executor, "step_files", None)
        short = []
        for index, point in enumerate(spec.points):
            want = hook(index, spec.step_files, got.get(index, 0)) if hook else spec.step_files
            if index in ran and got.get(index, 0) < want:
                short.append((point.concurrency, got.get(index, 0), want))
        return short

    def absorb(self, got: Collected) -> None:
        self.busy = bool(got)
        if got.returned:
            self.last_result = time.time()
            if self.stalled_since is not None:
                self.incident(f"Stall over after {self.last_result - self.stalled_since:.0f} s: copies finish again")
                self.stalled_since = None
        self.handed -= got.returned
        self.handed_bytes -= got.returned_bytes
        self.settled += got.returned_bytes
        self.moved += got.moved_bytes
        self.recent.extend(got.moved)
        self.done += got.done
        self.failed += got.failed
        if got.requeued:
            self.queue_empty = False
            self.retries_due = 0.0

    # -- control: cancel, heartbeat, progress -------------------------------------------------
    def control(self, now: float) -> None:
        run = self.run_obj
        if now - self.last_control >= CONTROL_SECONDS:
            self.last_control = now
            state = self._retrying(current_state, run.pk)
            if state == RunState.CANCELLING and not (self.stop and self.stop.kind == StopKind.CANCELLED):
                self.halt(Stop(StopKind.CANCELLED, "cancelled", give_back=True), now + self.spec.cancel_grace)
            if now - self.last_progress >= settings.STORAGEOPS_PROGRESS_SECONDS:
                self.last_progress = now
                self.watch_for_stall(now)
                self.mark_started()
                if not self._retrying(leases.renew_lease, run.pk, self.lease_holder, **self.progress(now)):
                    raise LeaseLost
        if self.abort_from is not None and now >= self.abort_from and now - self.last_abort >= ABORT_EVERY:
            if self.executor.outstanding():
                self.executor.cancel(abort_running=True)
            self.last_abort = now

    def mark_started(self) -> None:
        """Put each new copy's start time on its row: in flight is visible, with its age."""
        under_way = dict(self.executor.in_flight())
        new = [(pk, at) for pk, at in under_way.items() if pk not in self.marked]
        if new:
            self._retrying(store.mark_started, self.run_obj.pk, self.lease_holder, new)
        self.marked = set(under_way)

    def watch_for_stall(self, now: float) -> None:
        """Copies in flight and none finishing for STORAGEOPS_STALL_SECONDS: say so, once."""
        quiet = now - max(self.last_result, self.run_started)
        if self.stalled_since is None and self.executor.outstanding() and quiet >= settings.STORAGEOPS_STALL_SECONDS:
            self.stalled_since = now
            said = f"Stall: no copy finished for {quiet:.0f} s with {self.executor.outstanding()} in flight"
            self.incident(said)
            alerting.tell("run_stalled", self.run_obj.pk, said)

    def incident(self, summary: str) -> None:
        self._retrying(log_event, EventKind.RUN_INCIDENT, summary, run=self.run_obj)

    def halt(self, stop: Stop, abort_at: float) -> None:
        """Stop with copies in flight aborted at `abort_at` (a cancel's grace, or at once)."""
        self.stop = stop
        self.abort_from = abort_at
        self.executor.cancel(abort_running=False)

    def progress(self, now: float) -> dict:
        while self.recent and self.recent[0][0] < now - THROUGHPUT_WINDOW:
            self.recent.popleft()
        window = min(THROUGHPUT_WINDOW, max(now - self.run_started, 1e-3))
        rate = sum(b for _, b in self.recent) / window
        remaining = max(self.run_obj.planned_bytes - self.settled, 0)
        return {
            "active_transfers": self.executor.copying(),
            "throughput_bps": rate,
            "eta_seconds": remaining / rate if rate > 0 else None,
            "current_step": self.step.index,
            "current_concurrency": self.step.concurrency,
            "progress_at": timezone.now(),
            "stalled_since": _aware(self.stalled_since),
        }

    # -- budgets and steps ----------------------------------------------------------------------
    def advance(self, now: float) -> None:
        spec = self.spec
        timed_out = bool(spec.step_seconds) and now - self.step.started_at.timestamp() >= spec.step_seconds
        # A file-bounded step ends once all its files were claimed and the engine started them:
        # moving on earlier would run them at the next step's concurrency.
        filled = bool(spec.step_files) and self.step_claimed >= self.step_files()
        if spec.max_duration and now - self.run_started >= spec.max_duration:
            self.stop = Stop(StopKind.DURATION, f"duration budget reached ({spec.max_duration} s)", give_back=True)
        elif spec.max_bytes and self.moved + self.handed_bytes >= spec.max_bytes:
            self.stop = Stop(
                StopKind.BYTES,
                f"{spec.byte_budget_label} reached ({self.moved} of {spec.max_bytes} bytes moved or in flight)",
            )
        elif self.draining or timed_out or (filled and self.executor.unstarted(self.step.index) == 0):
            if not steps.is_last(self.step, spec):
                if timed_out and not self.draining:
                    # Jobs not yet started belong to the new step: give them back to be re-claimed.
                    self.give_back()
                # The barrier: the step's last copies end before the next step's first begin, so
                # no copy of one step runs beside another's and each measures its own concurrency.
                self.draining = spec.step_barrier == StepBarrier.DRAIN and self.executor.outstanding() > 0
                if self.draining:
                    return
                self.step = self._retrying(steps.next_step, self.step, spec)
                self.step_claimed = 0
                self.enter_step()
            else:
                self.stop = Stop(StopKind.SWEPT, f"{_sweep_name(spec)} completed", give_back=timed_out)

    def step_files(self) -> int:
        """The files the step in force hands out: the campaign's step_files, or more where the
        engine holds the step until it has measured it at its concurrency (FTS's warm-up)."""
        hook = getattr(self.executor, "step_files", None)
        planned = self.spec.step_files
        return hook(self.step.index, planned, self.step_claimed) if hook else planned

    def enter_step(self) -> None:
        try:
            self.executor.on_step(self.step.index, self.step.concurrency)
        except ExecutorFailed as exc:
            self.fail(str(exc))

    def fail(self, reason: str) -> None:
        """Stop as failed: what the engine holds is cancelled at once (and still recorded)."""
        self.halt(Stop(StopKind.FAILED, reason[:200], give_back=True), time.time())

    def fill(self, now: float) -> None:
        if self.queue_empty or self.draining or now < self.retries_due:
            return
        spec, run = self.spec, self.run_obj
        want = self.executor.room(self.step.concurrency)
        if spec.step_files:
            want = min(want, self.step_files() - self.step_claimed)
        if spec.max_bytes:
            # Hand out no more than the budget can still take (at most one file over).
            left = spec.max_bytes - self.moved - self.handed_bytes
            want = min(want, math.ceil(left / self.mean_size))
        if want <= 0 or (want < self.executor.min_claim and now - self.last_claim < CLAIM_PAUSE):
            return
        self.last_claim = now
        while want > 0 and self.stop is None:
            ask = min(want, self.executor.batch_size)
            jobs = self._retrying(store.claim, run.pk, ask, self.step.index, self.lease_holder)
            if len(jobs) < ask:
                # What is left waits for its retry, or nothing is left at all.
                due = self._retrying(store.next_retry_at, run.pk)
                self.queue_empty = due is None
                self.retries_due = due.timestamp() if due is not None else 0.0
            if not jobs:
                return
            try:
                self.executor.submit(jobs, self.step.index)
            except ExecutorFailed as exc:
                self._retrying(store.release, run.pk, [j.id for j in jobs], self.lease_holder)
                self.fail(str(exc))
                return
            self.step_claimed += len(jobs)
            self.handed += len(jobs)
            self.handed_bytes += sum(j.size for j in jobs)
            self.busy = True
            want -= len(jobs)

    def give_back(self) -> None:
        jobs = self.executor.give_back_unstarted()
        if not jobs:
            return
        self._retrying(store.release, self.run_obj.pk, [j.id for j in jobs], self.lease_holder)
        self.handed -= len(jobs)
        self.handed_bytes -= sum(j.size for j in jobs)
        self.step_claimed -= sum(1 for j in jobs if j.step == self.step.index)
        self.queue_empty = False


def _sweep_name(spec: RunSpec) -> str:
    """The name the stop reason gives what was swept: the concurrency, and a matrix's other axes."""
    return " × ".join(["concurrency", *(sweeps.AXIS_LABELS[a] for a in spec.swept_axes)]) + " sweep"


def _aware(epoch: float | None):
    return datetime.fromtimestamp(epoch, tz=UTC) if epoch is not None else None

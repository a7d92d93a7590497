"""The run driver: one loop per run that keeps N copies in flight and records each one.

One control thread talks to the database: it claims queued transfers for free slots,
hands them to copy threads, and writes finished attempts back in batches (with the
run's counters in the same transaction). Copy threads only copy. This keeps the
database work per transfer to a share of two batched statements, which is what lets
one worker record thousands of transfers a second, and it keeps every state change
of a transfer in one place.
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from datetime import UTC, datetime

from django.conf import settings
from django.db import DatabaseError, close_old_connections, connection, transaction
from django.utils import timezone

from campaigns import runs
from campaigns.choices import CampaignKind, RunState, TransferState
from campaigns.models import Endpoint, Run, RunStep, Transfer
from campaigns.results import analysis, charts, disturbance, verdicts
from campaigns.runs import cleanup, versions
from campaigns.runs import store as transfer_store
from campaigns.runs.copy_pool import CopyPool
from campaigns.runs.engines.base import CopyOptions, CopyResult, EndpointCredentials
from campaigns.runs.engines.gfal2_checksum import Gfal2Checksummer
from campaigns.runs.engines.gfal2_engine import Gfal2Copier
from campaigns.runs.planning import plan
from campaigns.runs.sources import create_sources
from collectors.events import log_event

log = logging.getLogger(__name__)

FLUSH_ROWS = 1000
FLUSH_SECONDS = 0.25
CONTROL_SECONDS = 0.5
THROUGHPUT_WINDOW = 10.0


def _now() -> float:
    return time.time()


def _dt(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, tz=UTC)


def build_copier(snapshot: dict) -> Gfal2Copier:
    """The engine for a run; secrets are read from the database now, never from the snapshot."""
    ids = {ep["id"] for ep in [*snapshot["sources"], *snapshot["destinations"]]}
    credentials = [
        EndpointCredentials(url=ep.url, bearer_token=ep.bearer_token, x509_proxy=ep.x509_proxy, ca_dir=ep.ca_dir)
        for ep in Endpoint.objects.filter(pk__in=ids)
    ]
    parameters = snapshot["parameters"]
    engine = Gfal2Checksummer if parameters.get("kind") == CampaignKind.CHECKSUM_LOAD else Gfal2Copier
    return engine(CopyOptions.from_snapshot(parameters), credentials)


class LeaseLost(Exception):
    """Another driver took the run over; this one must stop writing at once."""


class RunDriver:
    def __init__(self, run_id: int, *, executor: str | None = None, copier_factory=build_copier) -> None:
        self.run_id = run_id
        self.executor = executor or runs.executor_id()
        self.copier_factory = copier_factory

    # -- entry point ----------------------------------------------------------------------------
    def drive(self) -> str:
        if not runs.acquire_lease(self.run_id, self.executor):
            return "busy"
        run = Run.objects.select_related("campaign").get(pk=self.run_id)
        try:
            if run.state == RunState.CANCELLING and not run.started_at:
                self._finish(run, RunState.CANCELLED, "cancelled before start")
                return RunState.CANCELLED
            self.copier = self.copier_factory(run.snapshot)
            if run.state == RunState.PENDING:
                self._prepare(run)
            else:
                self._resume(run)
            return self._loop(run)
        except LeaseLost:
            log.warning("run %s: lease lost to another driver; stopping", self.run_id)
            return "lease lost"
        except Exception as exc:
            log.exception("run %s crashed", self.run_id)
            self._crash(exc)
            raise

    # -- phases -------------------------------------------------------------------------------
    def _prepare(self, run: Run) -> None:
        run.versions = versions.collect_versions(run.snapshot)
        checksums: dict[int, str] = {}
        if run.snapshot["parameters"].get("create_sources"):
            checksums = create_sources(run.snapshot, run.pk, self.copier)
        with transaction.atomic():
            if not Transfer.objects.filter(run_id=run.pk).exists():
                transfer_store.insert_plan(run.pk, plan(run.snapshot, run.pk), checksums)
            run.state = RunState.RUNNING
            run.started_at = timezone.now()
            Run.objects.filter(pk=run.pk, executor=self.executor).update(
                state=run.state, started_at=run.started_at, versions=run.versions
            )
        log_event("run_start", f"Run {run} started ({run.planned_files} files)", run=run)

    def _resume(self, run: Run) -> None:
        with transaction.atomic():
            orphans = transfer_store.requeue_orphans(run.pk)
            counts = transfer_store.recount(run.pk)
            Run.objects.filter(pk=run.pk).update(**counts)
        for key, value in counts.items():
            setattr(run, key, value)
        if orphans:
            log.info("run %s resumed: %d in-flight transfers requeued for a retry", run.pk, orphans)

    # -- the loop -----------------------------------------------------------------------------
    def _loop(self, run: Run) -> str:
        loop = _Loop(self, run)
        self.pool = CopyPool(self.copier)
        try:
            loop.run()
        finally:
            self.pool.close()
        final_state = loop.stop_state
        if final_state == RunState.SUCCEEDED and loop.failed and not loop.done:
            final_state = RunState.FAILED
        self._finish(run, final_state, loop.stop or "")
        return final_state

    def _flush(self, pending: list[CopyResult], retries: int) -> dict[str, int]:
        return self._retrying(transfer_store.record, self.run_id, pending, retries, executor=self.executor)

    def _retrying(self, operation, *args, **kwargs):
        """Run a database operation until it succeeds: an outage delays the run, loses nothing.

        Finished results wait in memory meanwhile; copies in flight go on. If the outage
        outlasts the lease, the next heartbeat finds the run taken over and stops.
        """
        delay = 0.5
        while True:
            try:
                return operation(*args, **kwargs)
            except DatabaseError as exc:
                log.warning("run %s: database unavailable (%s); retrying in %.1fs", self.run_id, exc, delay)
                close_old_connections()
                try:
                    connection.close()
                except DatabaseError:
                    pass
                time.sleep(delay)
                delay = min(delay * 2, 10.0)

    def _current_step(self, run: Run, steps: list[int]) -> RunStep:
        step = RunStep.objects.filter(run=run).order_by("-index").first()
        if step is None:
            return RunStep.objects.create(run=run, index=0, concurrency=steps[0], started_at=timezone.now())
        return step

    def _next_step(self, step: RunStep, steps: list[int]) -> RunStep:
        now = timezone.now()
        with transaction.atomic():
            RunStep.objects.filter(pk=step.pk).update(ended_at=now)
            return RunStep.objects.create(
                run_id=step.run_id, index=step.index + 1, concurrency=steps[step.index + 1], started_at=now
            )

    # -- endings --------------------------------------------------------------------------------
    def _finish(self, run: Run, state: str, reason: str) -> None:
        now = timezone.now()
        leftover = TransferState.CANCELLED if state == RunState.CANCELLED else TransferState.SKIPPED
        with transaction.atomic():
            transfer_store.close_remaining(run.pk, leftover, reason)
            RunStep.objects.filter(run=run, ended_at__isnull=True).update(ended_at=now)
        run.refresh_from_db()
        summary = analysis.run_summary(run)
        if disturbance.refresh_disturbed(run):
            summary["disturbance"] = disturbance.disturbance_report(run)
        summary["verdict"] = verdicts.run_verdict(run, summary, now)
        # When the last transfer record was committed, apart from the summary's own cost.
        summary["recorded_at"] = now.isoformat()
        summary["summary_seconds"] = round((timezone.now() - now).total_seconds(), 3)
        Run.objects.filter(pk=run.pk).update(
            state=state,
            finished_at=now,
            stop_reason=reason[:200],
            summary=summary,
            active_transfers=0,
            eta_seconds=None,
            heartbeat_at=now,
        )
        run.refresh_from_db()
        charts.store_timeline(run)
        log_event(
            "run_end",
            f"Run {run} {state}: {run.files_done} ok, {run.files_failed} failed, {run.files_skipped} skipped"
            + (f" ({reason})" if reason else ""),
            run=run,
        )
        if run.snapshot["parameters"].get("cleanup") == "delete" and getattr(self, "copier", None) is not None:
            try:
                cleanup.cleanup_run(run, self.copier)
            except Exception:
                # The run's record stands whatever happens to its clean-up.
                log.exception("run %s: clean-up failed", run.pk)

    def _crash(self, exc: BaseException) -> None:
        import traceback

        try:
            close_old_connections()
            Run.objects.filter(pk=self.run_id, executor=self.executor).update(
                state=RunState.FAILED,
                finished_at=timezone.now(),
                stop_reason="driver error",
                error="".join(traceback.format_exception(exc))[-20000:],
                active_transfers=0,
            )
            transfer_store.close_remaining(self.run_id, TransferState.SKIPPED, f"run failed: {exc!r}"[:500])
        except DatabaseError:
            log.exception("run %s: could not record the crash", self.run_id)


class _Loop:
    """The state of one drive of a run, stepped by `run()` until the run may finish.

    handed: jobs given to the pool and not yet back as results (waiting or copying).
    """

    def __init__(self, driver: RunDriver, run: Run) -> None:
        self.driver = driver
        self.run_obj = run
        params = run.snapshot["parameters"]
        self.steps: list[int] = params["concurrency_steps"]
        self.step_seconds = params.get("step_seconds")
        self.step_files = params.get("step_files")
        self.retries = params.get("retries", 0)
        self.grace = params.get("cancel_grace", 10)
        self.max_bytes = params.get("max_bytes")
        self.byte_budget_label = params.get("byte_budget_label") or "byte budget"
        self.max_duration = params.get("max_duration")
        self.run_started = run.started_at.timestamp()
        self.mean_size = max(run.planned_bytes / max(run.planned_files, 1), 1.0)
        self.step = driver._current_step(run, self.steps)
        # A file-bounded step hands out exactly step_files transfers; the next step starts as
        # soon as the last of them is handed out, so no slot sits idle between steps.
        self.step_claimed = Transfer.objects.filter(run_id=run.pk, step=self.step.index).count()
        self.handed = 0
        self.handed_bytes = 0
        self.done, self.failed = run.files_done, run.files_failed
        self.moved = run.bytes_done
        self.finished_planned = 0
        self.pending: list[CopyResult] = []
        self.recent: deque[tuple[float, int]] = deque()
        self.last_flush = self.last_control = self.last_progress = self.last_claim = self.last_abort = 0.0
        self.queue_empty = False
        self.stop: str | None = None
        self.stop_state = RunState.SUCCEEDED
        self.cancel_at: float | None = None
        # On a stop by time (or cancel), jobs handed out but not started go back to the queue;
        # on a stop by count (files, bytes) they were within the limit and still run.
        self.give_back = False
        self.busy = False

    @property
    def prefetch(self) -> int:
        return min(max(4, self.step.concurrency // 4), 512)

    def run(self) -> None:
        self.driver.pool.resize(self.step.concurrency)
        while True:
            now = _now()
            self.collect(now)
            self.control(now)
            if self.stop is None:
                self.advance(now)
            if self.stop is None:
                self.fill(now)  # before recording, so idle copy threads get work first
            self.flush(now)
            if self.stop is None and self.queue_empty and self.handed == 0 and not self.pending:
                self.stop = "all planned transfers finished"
            if self.stop:
                if self.give_back:
                    self.give_back_unstarted()
                if self.handed == 0 and not self.pending:
                    return

    def collect(self, now: float) -> None:
        # Wait a little for results unless the last round did something: a loop that spins
        # would take the interpreter lock from the copy threads it is feeding.
        got = self.driver.pool.collect(0.0 if self.busy else 0.01)
        self.busy = bool(got)
        for r in got:
            self.handed -= 1
            self.handed_bytes -= r.job.size
            self.finished_planned += r.job.size
            if r.ok:
                self.moved += r.bytes
                self.recent.append((r.finished, r.bytes))
            self.pending.append(r)

    def flush(self, now: float) -> None:
        if self.pending and (len(self.pending) >= FLUSH_ROWS or now - self.last_flush >= FLUSH_SECONDS or self.stop):
            delta = self.driver._flush(self.pending, self.retries)
            self.done += delta["done"]
            self.failed += delta["failed"]
            if delta["requeued"]:
                self.queue_empty = False
            self.pending.clear()
            self.last_flush = now

    def control(self, now: float) -> None:
        """Cancel requests, the heartbeat and the progress the dashboard shows."""
        driver, run = self.driver, self.run_obj
        if now - self.last_control >= CONTROL_SECONDS:
            self.last_control = now
            state = driver._retrying(runs.current_state, run.pk)
            if state == RunState.CANCELLING and self.stop != "cancelled":
                self.stop, self.stop_state, self.cancel_at = "cancelled", RunState.CANCELLED, now
                self.give_back = True
            if now - self.last_progress >= settings.STORAGEOPS_PROGRESS_SECONDS:
                self.last_progress = now
                if not driver._retrying(runs.renew_lease, run.pk, driver.executor, **self.progress(now)):
                    raise LeaseLost
        grace_over = self.cancel_at is not None and now - self.cancel_at >= self.grace
        if self.stop == "cancelled" and self.handed and grace_over and now - self.last_abort >= 1.0:
            driver.pool.cancel_running()
            self.last_abort = now

    def progress(self, now: float) -> dict:
        while self.recent and self.recent[0][0] < now - THROUGHPUT_WINDOW:
            self.recent.popleft()
        window = min(THROUGHPUT_WINDOW, max(now - self.run_started, 1e-3))
        rate = sum(b for _, b in self.recent) / window
        remaining = max(self.run_obj.planned_bytes - self.finished_planned, 0)
        return {
            "active_transfers": self.driver.pool.copying(),
            "throughput_bps": rate,
            "eta_seconds": remaining / rate if rate > 0 else None,
            "current_step": self.step.index,
            "current_concurrency": self.step.concurrency,
            "progress_at": timezone.now(),
        }

    def advance(self, now: float) -> None:
        """Budgets, and the move to the next concurrency step."""
        timed_out = bool(self.step_seconds) and now - self.step.started_at.timestamp() >= self.step_seconds
        if self.max_duration and now - self.run_started >= self.max_duration:
            self.stop = f"duration budget reached ({self.max_duration} s)"
            self.give_back = True
        elif self.max_bytes and self.moved + self.handed_bytes >= self.max_bytes:
            self.stop = f"{self.byte_budget_label} reached ({self.moved} of {self.max_bytes} bytes moved or in flight)"
        elif timed_out or (self.step_files and self.step_claimed >= self.step_files):
            self.give_back = timed_out
            if self.step.index + 1 < len(self.steps):
                if timed_out:
                    # Jobs not yet started belong to the new step: give them back to be re-claimed.
                    self.give_back_unstarted()
                self.step = self.driver._retrying(self.driver._next_step, self.step, self.steps)
                self.step_claimed = 0
                self.driver.pool.resize(self.step.concurrency)
            else:
                self.stop = "concurrency sweep completed"

    def fill(self, now: float) -> None:
        if self.queue_empty:
            return
        want = self.step.concurrency + self.prefetch - self.handed
        if self.step_files:
            want = min(want, self.step_files - self.step_claimed)
        if self.max_bytes:
            # Hand out no more than the budget can still take (at most one file over).
            left = self.max_bytes - self.moved - self.handed_bytes
            want = min(want, math.ceil(left / self.mean_size))
        if want <= 0 or (want < max(1, self.prefetch // 4) and now - self.last_claim < 0.05):
            return
        run = self.run_obj
        jobs = self.driver._retrying(transfer_store.claim, run.pk, want, self.step.index, self.driver.executor)
        self.last_claim = now
        self.step_claimed += len(jobs)
        if len(jobs) < want:
            self.queue_empty = True
        self.driver.pool.submit(jobs)
        self.busy = self.busy or bool(jobs)
        self.handed += len(jobs)
        self.handed_bytes += sum(j.size for j in jobs)

    def give_back_unstarted(self) -> None:
        jobs = self.driver.pool.take_unstarted()
        if not jobs:
            return
        self.driver._retrying(transfer_store.release, self.run_obj.pk, [j.id for j in jobs], self.driver.executor)
        self.handed -= len(jobs)
        self.handed_bytes -= sum(j.size for j in jobs)
        self.step_claimed -= sum(1 for j in jobs if j.step == self.step.index)
        self.queue_empty = False

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
import queue
import threading
import time
from collections import deque
from datetime import UTC, datetime

from django.conf import settings
from django.db import DatabaseError, close_old_connections, transaction
from django.utils import timezone

from campaigns import analysis, runs, transfer_store
from campaigns.choices import RunState, TransferState
from campaigns.engines.base import CopyJob, CopyOptions, CopyResult, EndpointCredentials
from campaigns.engines.gfal2_engine import Gfal2Copier
from campaigns.models import Endpoint, Run, RunStep, Transfer
from campaigns.planning import plan
from campaigns.sources import create_sources
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
    return Gfal2Copier(CopyOptions.from_snapshot(snapshot["parameters"]), credentials)


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
        run.versions = runs.collect_versions(run.snapshot)
        if run.snapshot["parameters"].get("create_sources"):
            create_sources(run.snapshot, run.pk, self.copier)
        with transaction.atomic():
            if not Transfer.objects.filter(run_id=run.pk).exists():
                transfer_store.insert_plan(run.pk, plan(run.snapshot, run.pk))
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
        params = run.snapshot["parameters"]
        steps: list[int] = params["concurrency_steps"]
        step_seconds, step_files = params.get("step_seconds"), params.get("step_files")
        retries = params.get("retries", 0)
        grace = params.get("cancel_grace", 10)
        max_bytes, max_duration = params.get("max_bytes"), params.get("max_duration")
        run_started = run.started_at.timestamp()
        mean_size = max(run.planned_bytes / max(run.planned_files, 1), 1.0)

        step = self._current_step(run, steps)
        # A file-bounded step hands out exactly step_files transfers; the next step starts as
        # soon as the last of them is claimed, so the slots never sit idle between steps.
        step_claimed = Transfer.objects.filter(run_id=run.pk, step=step.index).count()

        self.work: queue.SimpleQueue[CopyJob | None] = queue.SimpleQueue()
        self.results: queue.SimpleQueue[CopyResult] = queue.SimpleQueue()
        self.threads: list[threading.Thread] = []
        in_flight = in_flight_bytes = 0
        done, failed = run.files_done, run.files_failed
        moved = run.bytes_done
        finished_planned = 0
        pending: list[CopyResult] = []
        recent: deque[tuple[float, int]] = deque()
        last_flush = last_control = last_progress = last_claim = 0.0
        queue_empty = False
        stop: str | None = None
        stop_state = RunState.SUCCEEDED
        cancel_at: float | None = None
        last_abort = 0.0

        try:
            while True:
                now = _now()
                # 1. collect finished copies
                block = 0.02 if (stop or queue_empty or in_flight >= step.concurrency) else 0.0
                got = self._drain(pending, block)
                for r in got:
                    in_flight -= 1
                    in_flight_bytes -= r.job.size
                    finished_planned += r.job.size
                    if r.ok:
                        moved += r.bytes
                        recent.append((r.finished, r.bytes))
                if pending and (len(pending) >= FLUSH_ROWS or now - last_flush >= FLUSH_SECONDS or stop):
                    delta = self._flush(pending, retries)
                    done += delta["done"]
                    failed += delta["failed"]
                    if delta["requeued"]:
                        queue_empty = False
                    pending.clear()
                    last_flush = now

                # 2. control: cancel requests, heartbeat and progress
                if now - last_control >= CONTROL_SECONDS:
                    last_control = now
                    state = self._retrying(runs.current_state, run.pk)
                    if state == RunState.CANCELLING and stop != "cancelled":
                        stop, stop_state, cancel_at = "cancelled", RunState.CANCELLED, now
                    if now - last_progress >= settings.STORAGEOPS_PROGRESS_SECONDS:
                        last_progress = now
                        while recent and recent[0][0] < now - THROUGHPUT_WINDOW:
                            recent.popleft()
                        window = min(THROUGHPUT_WINDOW, max(now - run_started, 1e-3))
                        rate = sum(b for _, b in recent) / window
                        remaining = max(run.planned_bytes - finished_planned, 0)
                        eta = remaining / rate if rate > 0 else None
                        progress = {
                            "active_transfers": in_flight,
                            "throughput_bps": rate,
                            "eta_seconds": eta,
                            "current_step": step.index,
                            "current_concurrency": step.concurrency,
                            "progress_at": timezone.now(),
                        }
                        if not self._retrying(runs.renew_lease, run.pk, self.executor, **progress):
                            raise LeaseLost
                grace_over = cancel_at is not None and now - cancel_at >= grace
                if stop == "cancelled" and in_flight and grace_over and now - last_abort >= 1.0:
                    self.copier.cancel_all()
                    last_abort = now

                # 3. steps and budgets
                if stop is None:
                    if max_duration and now - run_started >= max_duration:
                        stop = f"duration budget reached ({max_duration} s)"
                    elif max_bytes and moved + in_flight_bytes >= max_bytes:
                        stop = f"byte budget reached ({moved} of {max_bytes} bytes moved or in flight)"
                    elif (step_seconds and now - step.started_at.timestamp() >= step_seconds) or (
                        step_files and step_claimed >= step_files
                    ):
                        if step.index + 1 < len(steps):
                            step = self._retrying(self._next_step, step, steps)
                            step_claimed = 0
                        else:
                            stop = "concurrency sweep completed"

                # 4. fill free slots
                if stop is None and not queue_empty:
                    free = step.concurrency - in_flight
                    if step_files:
                        free = min(free, step_files - step_claimed)
                    if max_bytes:
                        # Hand out no more than the budget can still take (at most one file over).
                        free = min(free, math.ceil((max_bytes - moved - in_flight_bytes) / mean_size))
                    if free > 0 and (free >= max(1, step.concurrency // 50) or now - last_claim >= 0.05):
                        jobs = self._retrying(transfer_store.claim, run.pk, free, step.index, self.executor)
                        last_claim = now
                        step_claimed += len(jobs)
                        if len(jobs) < free:
                            queue_empty = True
                        self._ensure_threads(step.concurrency)
                        for job in jobs:
                            self.work.put(job)
                        in_flight += len(jobs)
                        in_flight_bytes += sum(j.size for j in jobs)
                if stop is None and queue_empty and in_flight == 0 and not pending:
                    stop = "all planned transfers finished"
                if stop and in_flight == 0 and not pending:
                    break
        finally:
            self._stop_threads()

        final_state = stop_state
        if final_state == RunState.SUCCEEDED and failed and not done:
            final_state = RunState.FAILED
        self._finish(run, final_state, stop or "")
        return final_state

    # -- pieces of the loop ---------------------------------------------------------------------
    def _drain(self, pending: list[CopyResult], block: float) -> list[CopyResult]:
        got: list[CopyResult] = []
        try:
            if block:
                got.append(self.results.get(timeout=block))
            while True:
                got.append(self.results.get_nowait())
        except queue.Empty:
            pass
        pending.extend(got)
        return got

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
                    from django.db import connection

                    connection.close()
                except DatabaseError:
                    pass
                time.sleep(delay)
                delay = min(delay * 2, 10.0)

    def _ensure_threads(self, concurrency: int) -> None:
        while len(self.threads) < concurrency:
            thread = threading.Thread(target=self._copy_worker, name=f"copy-{len(self.threads)}", daemon=True)
            thread.start()
            self.threads.append(thread)

    def _copy_worker(self) -> None:
        while True:
            job = self.work.get()
            if job is None:
                return
            try:
                result = self.copier.copy(job)
            except Exception as exc:  # noqa: BLE001 - an engine bug must not lose the transfer
                now = _now()
                result = CopyResult(job, False, now, now, 0.0, message=f"engine error: {exc!r}", category="other")
            self.results.put(result)

    def _stop_threads(self) -> None:
        for _ in self.threads:
            self.work.put(None)
        for thread in self.threads:
            thread.join(timeout=5)

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
        log_event(
            "run_end",
            f"Run {run} {state}: {run.files_done} ok, {run.files_failed} failed, {run.files_skipped} skipped"
            + (f" ({reason})" if reason else ""),
            run=run,
        )

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

"""The one run lifecycle, for every engine: lease, prepare, resume, finish and crash here;
steps, budgets, cancel and progress in the loop (campaigns.runs.loop).

Which engine does the copies (a pool of gfal2 threads, FTS jobs, checksum requests) is the
executor's business alone (campaigns.runs.executors); every rule about when a step ends, when
a budget is reached and how a run stops exists once, for all of them.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable

from django.conf import settings
from django.db import DatabaseError, close_old_connections, transaction
from django.utils import timezone

from campaigns.choices import RunState
from campaigns.models import Run, Transfer, engine_registry
from campaigns.results import readers
from campaigns.results.finalize import finalize
from campaigns.runs import cleanup, existing_sources, leases, steps, store, tokens, versions
from campaigns.runs.executors import Executor
from campaigns.runs.loop import LeaseLost, RunLoop
from campaigns.runs.outages import retrying
from campaigns.runs.outcome import NOT_NEEDED_REASON
from campaigns.runs.planning import plan
from campaigns.runs.sources import PreparationCancelled, PreparationFailed, PreparationStopped, create_sources
from campaigns.runs.starting import current_state
from campaigns.runs.storage import Storage
from campaigns.runs.storage import for_run as storage_for_run
from campaigns.spec import RunSpec
from collectors.choices import EventKind
from collectors.events import log_event
from collectors.models import Event

log = logging.getLogger(__name__)

__all__ = ["LeaseLost", "RunDriver"]


class RunDriver:
    def __init__(
        self,
        run_id: int,
        *,
        lease_holder: str | None = None,
        copier_factory: Callable[[dict], Storage] = storage_for_run,
    ) -> None:
        self.run_id = run_id
        # The lease holder's id (host:pid:nonce); every row this driver writes carries it, in
        # the rows' `executor` column.
        self.lease_holder = lease_holder or leases.lease_holder_id()
        self.copier_factory = copier_factory
        self.copier = None  # the site's storage, for sources and clean-up, whatever engine copies
        self.tokens: tokens.RunTokens | None = None  # the run's storage tokens, while it is driven
        self.wrote_sources = False  # this drive prepared or resumed a run with generated sources
        self.executor: Executor | None = None

    def storage(self, run: Run):
        if self.copier is None:
            self.copier = self._make_copier(run.snapshot)
        return self.copier

    def _make_copier(self, snapshot: dict):
        """A copier of the copier factory's, sending the run's tokens (if any) to their endpoints."""
        copier = self.copier_factory(snapshot)
        if self.tokens:
            copier.use_tokens(self.tokens)
        return copier

    def _retrying(self, operation, *args, **kwargs):
        return retrying(self.run_id, operation, *args, **kwargs)

    # -- entry point ----------------------------------------------------------------------------
    def drive(self) -> str:
        if not leases.acquire_lease(self.run_id, self.lease_holder):
            return "busy"
        # With who started it: its start event says so (_prepare).
        run = Run.objects.select_related("campaign", "started_by").get(pk=self.run_id)
        self._check_clock(run)
        try:
            return self._drive(run)
        finally:
            if self.tokens is not None:
                self.tokens.close()

    def _drive(self, run: Run) -> str:
        try:
            if run.state == RunState.CANCELLING and not run.started_at:
                self._finish(run, RunState.CANCELLED, "cancelled before start", {})
                return RunState.CANCELLED
            # The run's engine builds its executor; the storage factory goes along, for the
            # engines that copy through the storage library (tests replace it).
            entry = engine_registry.engine(RunSpec.of(run).engine)
            # Before anything touches a door: a refused token fails the run before its first copy,
            # with the issuer's words (not a driver crash: nothing of StorageOps went wrong).
            try:
                self.tokens = tokens.for_run(run.snapshot, run.pk, keepalive=self._renewer())
            except tokens.TokenError as exc:
                self._finish(run, RunState.FAILED, str(exc)[:200], {})
                return RunState.FAILED
            self.executor = entry.build_executor(run, self.lease_holder, self._make_copier)
            if self.tokens and hasattr(self.executor, "use_tokens"):
                # An engine that hands copies to a service of its own (FTS) sends it the tokens.
                self.executor.use_tokens(self.tokens)
            try:
                if run.state == RunState.PENDING:
                    try:
                        self._prepare(run)
                    except PreparationStopped as stop:
                        return self._stopped_preparing(run, stop)
                else:
                    self._resume(run)
                drive = RunLoop(run, self.executor, lease_holder=self.lease_holder)
                drive.run()
            finally:
                self.executor.close()
            ending = drive.outcome()
            extras = self.executor.finish()
            problems = extras.pop("problems", [])
            reason = "; ".join(filter(None, [ending.reason, *problems]))
            self._finish(run, ending.state, reason, extras, not_needed=ending.not_needed)
            return ending.state
        except LeaseLost:
            log.warning("run %s: lease lost to another driver; stopping", self.run_id)
            self._incident(run, f"Driver {self.lease_holder} lost its lease on run {run} to another driver and stopped")
            return "lease lost"
        except Exception as exc:
            log.exception("run %s crashed", self.run_id)
            self._crash(exc)
            raise

    # -- phases -------------------------------------------------------------------------------
    def _prepare(self, run: Run) -> None:
        run.versions = versions.collect_versions(run.snapshot)
        spec = RunSpec.of(run)
        # A retry copies the files its chain's first run generated, with their recorded
        # checksums: a door refuses to overwrite a file that a copy given up on still reads.
        # Only a chain whose clean-up deleted them (cleanup=delete) writes them again: the same
        # bytes, generated from the same seed.
        checksums = store.source_checksums(spec.retry.of) if spec.retry and spec.cleanup != "delete" else None
        if existing_sources.needs_listing(run.snapshot):
            self._list_existing(run)
        if checksums is None:
            checksums = {}
            if spec.create_sources:
                self.wrote_sources = True
                checksums = create_sources(run.snapshot, run.pk, self.storage(run), self._preparation_control())
        with transaction.atomic():
            if not Transfer.objects.filter(run_id=run.pk).exists():
                store.insert_plan(run.pk, plan(run.snapshot, run.pk), checksums)
            run.state = RunState.RUNNING
            run.started_at = timezone.now()
            # Its first step is in force from its start, before the loop's first progress says so.
            run.current_step, run.current_concurrency = 0, spec.points[0].concurrency
            Run.objects.filter(pk=run.pk, executor=self.lease_holder).update(
                state=run.state,
                started_at=run.started_at,
                versions=run.versions,
                current_step=run.current_step,
                current_concurrency=run.current_concurrency,
            )
        # A driver that died in its preparation is followed by another: one start on the record.
        if not Event.objects.filter(run_id=run.pk, kind=EventKind.RUN_START).exists():
            log_event(
                "run_start",
                f"Run {run} started ({run.planned_files} files)",
                run=run,
                user=run.started_by,
                who=run.started_by_name,
            )

    def _list_existing(self, run: Run) -> None:
        """Existing data: list it with its sizes and checksums from the storage, keep the listing
        in the run's snapshot (the plan is made from it) and plan that many files and bytes."""
        listing = existing_sources.list_existing(run.snapshot, self.storage(run), self._preparation_control())
        run.snapshot = {**run.snapshot, "listing": listing}
        files, size = existing_sources.listed_totals(listing)
        Run.objects.filter(pk=run.pk, executor=self.lease_holder).update(
            snapshot=run.snapshot, planned_files=files, planned_bytes=size
        )
        run.planned_files, run.planned_bytes = files, size

    def _renewer(self) -> Callable[[], bool]:
        """Renews the lease when STORAGEOPS_PROGRESS_SECONDS have passed, as the run loop does,
        for the phases outside it; False once another driver holds the run."""
        last = time.monotonic()

        def renew() -> bool:
            nonlocal last
            if time.monotonic() - last < settings.STORAGEOPS_PROGRESS_SECONDS:
                return True
            last = time.monotonic()
            return self._retrying(leases.renew_lease, self.run_id, self.lease_holder)

        return renew

    def _preparation_control(self) -> Callable[[], None]:
        """What the run loop does for cancel and heartbeat, while the sources are written."""
        renew = self._renewer()

        def control() -> None:
            if self._retrying(current_state, self.run_id) == RunState.CANCELLING:
                raise PreparationCancelled
            if not renew():
                raise LeaseLost

        return control

    def _stopped_preparing(self, run: Run, stop: PreparationStopped) -> str:
        state = RunState.CANCELLED if isinstance(stop, PreparationCancelled) else RunState.FAILED
        log.warning("run %s: %s", self.run_id, stop.reason)
        if isinstance(stop, PreparationFailed):
            self._incident(run, f"Run {run} could not start: {stop.reason}"[:300])
        self._finish(run, state, stop.reason, {})
        return state

    def _resume(self, run: Run) -> None:
        self.wrote_sources = RunSpec.of(run).create_sources
        said = self.executor.resume()
        counts = self._retrying(store.recount, run.pk)
        self._retrying(Run.objects.filter(pk=run.pk).update, **counts)
        for key, value in counts.items():
            setattr(run, key, value)
        log.info("run %s resumed: %s", run.pk, said)
        self._incident(run, f"Run {run} resumed by driver {self.lease_holder}: {said}")

    # -- endings --------------------------------------------------------------------------------
    def _finish(self, run: Run, state: str, reason: str, extras: dict, *, not_needed: int = 0) -> None:
        """End the run as `state`; `not_needed` of its transfers never tried were not needed (a
        completed sweep of time-bounded steps): they say so, and its results count them."""
        now = timezone.now()
        if not_needed:
            extras = {**extras, readers.NOT_NEEDED: not_needed}
        deletes = RunSpec.of(run).cleanup == "delete"
        # Before the run is final, so no retry of it (which writes them again) reads them yet.
        sources = None
        if deletes and self.wrote_sources:
            renew = self._renewer()  # the run is not final yet: its lease must hold meanwhile
            sources = self._cleaning(run, lambda: cleanup.remove_sources(run, self.storage(run), renew))
        with transaction.atomic():
            store.close_remaining(run.pk, reason, not_needed=NOT_NEEDED_REASON if not_needed else "")
            steps.end_open_steps(run.pk, now)
        run.refresh_from_db()
        finalize(run, state=state, reason=reason, now=now, extras=extras)
        counts = readers.file_counts(run)
        log_event(
            "run_end",
            f"Run {run} {state}: {counts['ok']} ok, {counts['failed']} failed, {counts['skipped']} skipped"
            + (f", {counts['not_needed']} not needed" if counts["not_needed"] else "")
            + (f", {counts['cancelled']} cancelled under way" if counts["cancelled"] else "")
            + (f" ({reason})" if reason else ""),
            run=run,
        )
        if deletes and run.started_at:
            self._cleaning(run, lambda: cleanup.cleanup_run(run, self.storage(run), sources=sources))
        elif sources is not None:
            self._cleaning(run, lambda: cleanup.record_sources(run, sources))

    def _cleaning(self, run: Run, operation: Callable[[], dict | None]) -> dict | None:
        try:
            return operation()
        except Exception:
            # The run's record stands whatever happens to its clean-up.
            log.exception("run %s: clean-up failed", run.pk)
            return None

    def _check_clock(self, run: Run) -> None:
        """Say so on the run when this host's clock is off: its lease is safe (the database's
        clock judges it), but the copies' times it records are off by as much."""
        try:
            skew = leases.clock_skew_seconds()
        except DatabaseError:
            return
        if abs(skew) > leases.CLOCK_SKEW_SECONDS:
            where = "ahead of" if skew > 0 else "behind"
            self._incident(
                run,
                f"Driver {self.lease_holder}: this host's clock is {abs(skew):.0f} s {where} the database's; "
                "the copy times it records for this run are off by as much (check its NTP)",
            )

    def _incident(self, run: Run, summary: str) -> None:
        try:
            log_event(EventKind.RUN_INCIDENT, summary, run=run)
        except DatabaseError:
            log.exception("run %s: could not record: %s", self.run_id, summary)

    def _crash(self, exc: BaseException) -> None:
        if self.executor is not None:
            try:
                self.executor.crashed()
            except Exception:  # the crash itself must still be recorded
                log.exception("run %s: undoing the engine's changes after a crash failed", self.run_id)
        try:
            close_old_connections()
            Run.objects.filter(pk=self.run_id, executor=self.lease_holder).update(
                state=RunState.FAILED,
                finished_at=timezone.now(),
                stop_reason="driver error",
                error="".join(traceback.format_exception(exc))[-20000:],
                active_transfers=0,
            )
            store.close_remaining(self.run_id, f"run failed: {exc!r}"[:500])
            self._incident(Run(pk=self.run_id), f"Run {self.run_id}: the driver crashed ({exc!r})"[:300])
        except DatabaseError:
            log.exception("run %s: could not record the crash", self.run_id)

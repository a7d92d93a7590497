"""The FTS run driver: the same run lifecycle as gfal2 runs, the copies done by an FTS3 server.

It plugs into RunDriver (lease, plan, resume, finish, crash handling are shared) and replaces
its copy loop: transfers are claimed from the plan as before, submitted to FTS in bulk jobs,
polled in batches, and each file's final state is written into its Transfer row with FTS's own
figures. A step's concurrency is enforced by FTS through a pinned link limit where the instance
allows it, and by StorageOps never having more files in FTS than the step's concurrency
otherwise. The task runs on the "control" queue: it only talks to FTS and the database.
"""

from __future__ import annotations

import logging
import math
import time

from django.conf import settings
from django.utils import timezone

from campaigns import runs
from campaigns.choices import RunState
from campaigns.models import FtsInstance, Run
from campaigns.runs import fts_links, fts_store
from campaigns.runs import store as transfer_store
from campaigns.runs.engines.fts import (
    FINAL_FILE_STATES,
    FINAL_JOB_STATES,
    FtsClient,
    FtsError,
    FtsSettings,
    JobOptions,
    file_outcome,
    job_body,
)
from campaigns.runs.lifecycle import LeaseLost, RunDriver

log = logging.getLogger(__name__)
TICK_SECONDS = 0.2


def build_client(snapshot: dict) -> FtsClient:
    """Credentials are read from the database now, never from the snapshot."""
    instance = FtsInstance.objects.get(pk=snapshot["parameters"]["fts_instance_id"])
    return FtsClient(FtsSettings.from_instance(instance))


class FtsRunDriver(RunDriver):
    def __init__(self, run_id: int, *, executor: str | None = None, client_factory=build_client, **kwargs) -> None:
        super().__init__(run_id, executor=executor, **kwargs)
        self.client_factory = client_factory
        self._client: FtsClient | None = None
        self.fts_report: dict = {}

    def client(self, run: Run) -> FtsClient:
        if self._client is None:
            self._client = self.client_factory(run.snapshot)
        return self._client

    def _resume(self, run: Run) -> None:
        kept, requeued = self._retrying(fts_store.adopt, run.pk, self.executor)
        counts = transfer_store.recount(run.pk)
        Run.objects.filter(pk=run.pk).update(**counts)
        for key, value in counts.items():
            setattr(run, key, value)
        log.info("run %s resumed: %d transfers still in FTS jobs, %d requeued", run.pk, kept, requeued)

    def _loop(self, run: Run) -> str:
        loop = _FtsLoop(self, run)
        loop.run()
        state = loop.stop_state
        if state == RunState.SUCCEEDED and loop.failed and not loop.done:
            state = RunState.FAILED
        self._finish(run, state, loop.stop or "")
        return state

    def _finish(self, run: Run, state: str, reason: str) -> None:
        fts = run.snapshot.get("fts", {})
        if fts.get("manage_link_limits") or run.fts_link_limits.exists():
            errors = fts_links.restore(self.client(run), run)
            if errors:
                reason = (reason + "; " if reason else "") + f"{len(errors)} FTS link limit(s) not restored"
        if run.started_at:
            try:
                self.fts_report = fts_links.read_fts_side(
                    self.client(run), run, fts_links.run_links(run), run.started_at, timezone.now()
                )
            except FtsError as exc:
                self.fts_report = {"error": str(exc)}
        super()._finish(run, state, reason)
        run.refresh_from_db()
        summary = dict(run.summary)
        summary["fts"] = {
            **self.fts_report,
            "instance": fts.get("name", ""),
            "jobs": sorted(set(run.transfers.exclude(fts_job_id="").values_list("fts_job_id", flat=True))),
            "link_limits": [
                {
                    "symbolicname": link.symbolicname,
                    "previous": link.previous,
                    "applied": link.applied,
                    "restored_at": link.restored_at.isoformat() if link.restored_at else None,
                    "restore_error": link.restore_error,
                }
                for link in run.fts_link_limits.all()
            ],
        }
        Run.objects.filter(pk=run.pk).update(summary=summary)

    def _crash(self, exc: BaseException) -> None:
        try:
            run = Run.objects.get(pk=self.run_id)
            if run.fts_link_limits.filter(restored_at__isnull=True).exists():
                fts_links.restore(self.client(run), run)
        except Exception:  # the crash itself must still be recorded
            log.exception("run %s: restoring FTS link limits after a crash failed", self.run_id)
        super()._crash(exc)


class _FtsLoop:
    """One drive of an FTS run: submit while there is room, poll, record, step, stop."""

    def __init__(self, driver: FtsRunDriver, run: Run) -> None:
        self.driver, self.run_obj = driver, run
        params = run.snapshot["parameters"]
        fts = run.snapshot.get("fts", {})
        self.client = driver.client(run)
        self.options = JobOptions.from_parameters(params)
        self.files_per_job = fts.get("files_per_job", 100)
        self.poll_seconds = fts.get("poll_seconds", 2.0)
        self.manage_links = fts.get("manage_link_limits", False)
        self.steps: list[int] = params["concurrency_steps"]
        self.step_seconds = params.get("step_seconds")
        self.step_files = params.get("step_files")
        self.grace = params.get("cancel_grace", 10)
        self.max_bytes = params.get("max_bytes")
        self.max_duration = params.get("max_duration")
        self.metadata = {"storageops": True, "campaign": run.snapshot["campaign_id"], "run": run.pk}
        self.links = fts_links.run_links(run) if self.manage_links else []
        self.step = driver._current_step(run, self.steps)
        self.step_claimed = run.transfers.filter(step=self.step.index).count()
        self.jobs: dict[str, int] = {}  # job id -> its transfers not yet recorded
        self.job_step: dict[str, int] = {}  # job id -> the step it was submitted in
        self.unstarted: dict[str, int] = {}  # job id -> its files FTS had not started at the last poll
        for job_id in fts_store.submitted_jobs(run.pk):
            rows = run.transfers.filter(fts_job_id=job_id, state="active")
            self.jobs[job_id] = self.unstarted[job_id] = rows.count()
            self.job_step[job_id] = rows.values_list("step", flat=True).first() or 0
        self.done, self.failed, self.moved = run.files_done, run.files_failed, run.bytes_done
        self.queue_empty = False
        self.stop: str | None = None
        self.stop_state = RunState.SUCCEEDED
        self.cancel_at: float | None = None
        self.cancel_sent = False
        self.last_poll = self.last_control = self.last_progress = 0.0
        self.recent: list[tuple[float, int]] = []

    @property
    def in_flight(self) -> int:
        return sum(self.jobs.values())

    def run(self) -> None:
        if self.manage_links:
            self.pin_links()
        while True:
            now = time.time()
            self.control(now)
            if self.stop is None:
                self.advance(now)
            if self.stop is None:
                self.fill()
            if now - self.last_poll >= self.poll_seconds or (self.stop and now - self.last_poll >= TICK_SECONDS * 5):
                self.poll()
                self.last_poll = now
            if self.stop is None and self.queue_empty and not self.jobs:
                self.stop = "all planned transfers finished"
            if self.stop and not self.jobs:
                return
            if self.cancel_sent and self.cancel_at and now - self.cancel_at >= max(self.grace, 1) + 30:
                # FTS did not confirm the cancel in time: the rows left are closed as cancelled.
                log.warning("run %s: FTS jobs still open after cancel: %s", self.run_obj.pk, list(self.jobs))
                return
            time.sleep(TICK_SECONDS)

    # -- control ----------------------------------------------------------------------------------
    def control(self, now: float) -> None:
        driver, run = self.driver, self.run_obj
        if now - self.last_control < 0.5:
            return
        self.last_control = now
        state = driver._retrying(runs.current_state, run.pk)
        if state == RunState.CANCELLING and self.stop != "cancelled":
            self.stop, self.stop_state, self.cancel_at = "cancelled", RunState.CANCELLED, now
        if self.stop == "cancelled":
            # Cancel on FTS: DELETE the run's jobs; their files come back CANCELED and are recorded.
            self.send_cancel()
        if now - self.last_progress >= settings.STORAGEOPS_PROGRESS_SECONDS:
            self.last_progress = now
            cutoff = now - 10.0
            self.recent = [(t, b) for t, b in self.recent if t >= cutoff]
            rate = sum(b for _, b in self.recent) / 10.0
            remaining = max(run.planned_bytes - self.moved, 0)
            fields = {
                "active_transfers": max(self.in_flight - sum(self.unstarted.values()), 0),
                "throughput_bps": rate,
                "eta_seconds": remaining / rate if rate > 0 else None,
                "current_step": self.step.index,
                "current_concurrency": self.step.concurrency,
                "progress_at": timezone.now(),
            }
            if not driver._retrying(runs.renew_lease, run.pk, driver.executor, **fields):
                raise LeaseLost

    def advance(self, now: float) -> None:
        timed_out = bool(self.step_seconds) and now - self.step.started_at.timestamp() >= self.step_seconds
        if self.max_duration and now - self.run_obj.started_at.timestamp() >= self.max_duration:
            self.stop = f"duration budget reached ({self.max_duration} s)"
        elif self.max_bytes and self.moved >= self.max_bytes:
            self.stop = f"byte budget reached ({self.moved} of {self.max_bytes} bytes moved)"
        elif timed_out or (self.step_files and self.step_claimed >= self.step_files and not self.step_waiting()):
            if self.step.index + 1 < len(self.steps):
                self.step = self.driver._retrying(self.driver._next_step, self.step, self.steps)
                self.step_claimed = 0
                if self.manage_links:
                    self.pin_links()
            else:
                self.stop = "concurrency sweep completed"

    def step_waiting(self) -> bool:
        """Files of the current step FTS has not started yet. A file-bounded step ends only once
        FTS started all its files: re-pinning the link earlier would run them at the next
        step's concurrency (FTS holds a queue of them, unlike gfal2's few prefetched copies)."""
        return any(self.unstarted.get(j, 0) for j, step in self.job_step.items() if step == self.step.index)

    def pin_links(self) -> None:
        try:
            fts_links.apply_step(self.client, self.run_obj, self.links, self.step.concurrency)
        except FtsError as exc:
            # Without the config role (403) the steps cannot be honoured: stop rather than
            # measure a concurrency nobody set. What was already changed is restored at the end.
            self.fail(f"Could not pin the link limit on FTS: {exc}")

    def fail(self, reason: str) -> None:
        """Stop the run as failed and take its jobs off FTS (their files are recorded)."""
        self.stop, self.stop_state = reason[:200], RunState.FAILED
        self.send_cancel()

    def send_cancel(self) -> None:
        if self.cancel_sent or not self.jobs:
            return
        try:
            self.client.cancel(list(self.jobs))
        except FtsError as exc:
            log.warning("run %s: cancelling FTS jobs failed, will retry: %s", self.run_obj.pk, exc)
            return
        self.cancel_sent = True
        if self.cancel_at is None:
            self.cancel_at = time.time()

    def fill(self) -> None:
        if self.queue_empty:
            return
        # With a pinned link FTS itself holds the step's concurrency, and a job's worth queued
        # on its side keeps it busy between polls; otherwise StorageOps is the limit.
        room = self.step.concurrency + (self.files_per_job if self.manage_links else 0) - self.in_flight
        if self.step_files:
            room = min(room, self.step_files - self.step_claimed)
        if self.max_bytes:
            # Submit no more than the budget can still take (files in FTS counted at the mean size).
            mean = max(self.run_obj.planned_bytes / max(self.run_obj.planned_files, 1), 1.0)
            room = min(room, math.ceil((self.max_bytes - self.moved) / mean) - self.in_flight)
        while room > 0 and self.stop is None:
            want = min(room, self.files_per_job)
            jobs = self.driver._retrying(
                transfer_store.claim, self.run_obj.pk, want, self.step.index, self.driver.executor
            )
            if len(jobs) < want:
                self.queue_empty = True
            if not jobs:
                return
            try:
                job_id = self.client.submit(job_body(jobs, self.options, {**self.metadata, "step": self.step.index}))
            except FtsError as exc:
                # A refused submission (credentials, delegation, validation) will not get better
                # by retrying: the claimed rows go back and the run stops as failed, saying why.
                self.driver._retrying(
                    transfer_store.release, self.run_obj.pk, [j.id for j in jobs], self.driver.executor
                )
                self.fail(f"Could not submit to FTS: {exc}")
                return
            self.driver._retrying(
                fts_store.mark_submitted, self.run_obj.pk, [j.id for j in jobs], job_id, self.driver.executor
            )
            self.jobs[job_id] = self.unstarted[job_id] = len(jobs)
            self.job_step[job_id] = self.step.index
            self.step_claimed += len(jobs)
            room -= len(jobs)

    # -- polling ----------------------------------------------------------------------------------
    def poll(self) -> None:
        if not self.jobs:
            return
        try:
            statuses = self.client.jobs(list(self.jobs))
        except FtsError as exc:
            # FTS unreachable or overloaded: the jobs go on over there; ask again next time.
            log.warning("run %s: polling FTS failed: %s", self.run_obj.pk, exc)
            return
        for status in statuses:
            job_id = status.get("job_id")
            if job_id not in self.jobs:
                continue
            if str(status.get("http_status", "")).startswith("404"):
                # Gone on FTS (purged, or another FTS behind the alias): its rows are closed at the end.
                log.warning("run %s: FTS does not know job %s any more", self.run_obj.pk, job_id)
                self.forget(job_id)
                continue
            self.unstarted[job_id] = sum(1 for f in status.get("files", []) if f.get("file_state") == "SUBMITTED")
            final = [file_outcome(f) for f in status.get("files", []) if f.get("file_state") in FINAL_FILE_STATES]
            if final:
                delta = self.driver._retrying(
                    fts_store.record_files, self.run_obj.pk, final, job_id, self.driver.executor
                )
                self.done += delta["done"]
                self.failed += delta["failed"]
                self.moved += delta["bytes"]
                if delta["bytes"]:
                    self.recent.append((time.time(), delta["bytes"]))
                self.jobs[job_id] -= delta["written"]
            if status.get("job_state") in FINAL_JOB_STATES:
                # Every file of a final job is final; a row it did not report is closed at the end.
                self.forget(job_id)

    def forget(self, job_id: str) -> None:
        for table in (self.jobs, self.job_step, self.unstarted):
            table.pop(job_id, None)

"""The FTS executor: claimed jobs go to an FTS3 server in bulk jobs, polled in batches; each
file's final state is written into its Transfer row with FTS's own figures.

A step's concurrency is held by StorageOps never having more files in FTS than the step's
concurrency, until FTS's optimizer has put the link's pinned range in force (a range set on a
link is obeyed only from the optimizer's next pass, and a new link bursts 10 files per
scheduling pass before that); from then on FTS holds it and the link is kept full. Without link
management StorageOps is the limit throughout. The driver only talks to FTS and the database; it
runs on "transfers" with every run's driver, since it lasts the whole run.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime

from django.utils import timezone

from campaigns.models import Run
from campaigns.runs.engines.copies import CopyJob, TokenSource
from campaigns.runs.engines.fts import landed
from campaigns.runs.engines.fts import links as fts_links
from campaigns.runs.engines.fts import store as fts_store
from campaigns.runs.engines.fts.client import (
    FINAL_FILE_STATES,
    FINAL_JOB_STATES,
    FtsClient,
    FtsError,
    FtsSettings,
    JobOptions,
    active_starts,
    file_outcome,
    job_body,
)
from campaigns.runs.engines.fts.models import FtsInstance
from campaigns.runs.engines.fts.options import FtsOptions
from campaigns.runs.engines.fts.snapshot import FtsSpec
from campaigns.runs.executors.base import Collected, ExecutorFailed
from campaigns.runs.outages import retrying
from campaigns.spec import RunSpec

log = logging.getLogger(__name__)
TICK_SECONDS = 0.2
STOPPING_POLL_SECONDS = 1.0
# A file cancelled while copying comes back CANCELED with no finish time, which FTS writes once
# the copy has stopped (about 4 s later): its job is polled this long for it at most.
CANCEL_FINISH_WAIT = 10.0
NO_FINISH_NOTE = " (FTS gave no finish time within {:.0f} s: finished_at is when StorageOps saw it cancelled)"


def build_client(options: FtsOptions) -> FtsClient:
    """Credentials are read from the database now, never from the snapshot."""
    instance = FtsInstance.objects.get(pk=options.instance_id)
    return FtsClient(FtsSettings.from_instance(instance))


class _Job:
    __slots__ = ("bytes", "rows", "step", "unstarted")

    def __init__(self, rows: int, planned_bytes: int, step: int) -> None:
        self.rows, self.bytes, self.step, self.unstarted = rows, planned_bytes, step, rows


class FtsExecutor:
    min_claim = 1

    def __init__(
        self, run: Run, client: FtsClient, *, lease_holder: str, storage: Callable | None = None,
        fts_options: FtsOptions | None = None,
    ) -> None:  # fmt: skip
        """storage: returns the gfal2 copier the driver uses for sources and clean-up (built on
        first use); cancelled copies are checked on their destination through it."""
        self.run = run
        self.storage = storage
        self.spec = RunSpec.of(run)
        self.fts = FtsSpec.from_snapshot(run.snapshot)
        self.client = client
        self.lease_holder = lease_holder
        self.token_for: Callable[[str], str] | None = None  # the run's storage tokens, by URL (use_tokens)
        # The run's FTS options, read from its snapshot once: the job options, the measured files.
        fts_options = fts_options or FtsOptions.of(run.snapshot)
        self.options = JobOptions.from_spec(self.spec, fts_options)
        self.batch_size = self.fts.files_per_job
        self.manage_links = self.fts.manage_link_limits
        self.links = fts_links.run_links(run) if self.manage_links else []
        self.metadata = {"storageops": True, "campaign": self.spec.campaign_id, "run": run.pk}
        self.jobs: dict[str, _Job] = {}
        self.cancel_sent = False
        self.cancel_sent_at: datetime | None = None  # when StorageOps sent it (its notes say)
        self.last_poll = 0.0
        # The step's pinned value, and whether FTS's optimizer has put it in force on the links.
        self.pinned = 0
        self.in_force = not self.manage_links
        self.last_check = 0.0
        self.no_evolution = False
        self.cancel_seen: dict[int, float] = {}  # FTS file id -> when first seen CANCELED without finish time
        self.whole_at: dict[int, float] = {}  # transfer id -> when first found whole, cancelled and not yet killed
        self.active: dict[int, float] = {}  # transfer id -> FTS's start time, of files FTS says are ACTIVE
        # The step in force, its concurrency, and when FTS first ran it at that (None: not yet).
        self.step_index, self.step_concurrency = 0, 0
        self.step_ids: set[int] = set()  # the transfers submitted in the step in force
        self.measured_from: float | None = None
        self.measure_files = fts_options.measure_files

    def _retrying(self, operation, *args, **kwargs):
        return retrying(self.run.pk, operation, *args, **kwargs)

    # -- the interface ------------------------------------------------------------------------
    def resume(self) -> str:
        # Rows an FTS job holds stay with it (now ours); rows never submitted are requeued.
        kept, requeued = self._retrying(fts_store.adopt, self.run.pk, self.lease_holder)
        for job_id in fts_store.submitted_jobs(self.run.pk):
            rows = fts_store.job_rows(self.run.pk, job_id)
            step = rows.values_list("step", flat=True).first() or 0
            self.jobs[job_id] = _Job(rows.count(), sum(rows.values_list("size", flat=True)), step)
        return f"{kept} transfers still in FTS jobs, {requeued} requeued"

    def on_step(self, index: int, concurrency: int) -> None:
        self.step_index, self.step_concurrency, self.step_ids = index, concurrency, set()
        self.measured_from = None
        if not self.manage_links:
            return
        try:
            fts_links.apply_step(self.client, self.run, self.links, concurrency)
        except FtsError as exc:
            # Without the config role (403) the steps cannot be honoured: stop rather than
            # measure a concurrency nobody set. What was already changed is restored at the end.
            raise ExecutorFailed(f"Could not pin the link limit on FTS: {exc}") from exc
        # FTS obeys the new range only from its optimizer's next pass: until it says so, the
        # step's concurrency is held here.
        self.pinned, self.in_force, self.last_check = concurrency, False, 0.0

    def room(self, concurrency: int) -> int:
        # Once the pinned value is in force FTS holds the step's concurrency, and files queued on
        # its side keep it busy; until then StorageOps is the limit (files in FTS <= concurrency).
        # The loop never claims more than the step's own files, whatever this says.
        return concurrency + self.queued_ahead(concurrency) - self.outstanding()

    def queued_ahead(self, concurrency: int) -> int:
        """Files kept queued in FTS beyond the step's concurrency, once FTS holds the step.

        FTS starts queued files only at its scheduler's pass (SchedulingInterval, 2 s by
        default): a slot freed between passes is refilled at the next one only if a file of the
        link is queued then, else it waits for StorageOps' next poll and submission, and the
        pass after that. So each link gets a job's worth ahead (files_per_job), and at least the
        step's concurrency: every slot of the link may have emptied since the last pass."""
        if not (self.manage_links and self.in_force):
            return 0
        return max(len(self.links), 1) * max(self.batch_size, concurrency)

    def submit(self, jobs: list[CopyJob], step: int) -> None:
        try:
            body = job_body(jobs, self._options(step), {**self.metadata, "step": step}, self.token_for)
            job_id = self.client.submit(body)
        except FtsError as exc:
            # A refused submission (credentials, delegation, validation) will not get better
            # by retrying.
            raise ExecutorFailed(f"Could not submit to FTS: {exc}") from exc
        ids = [j.id for j in jobs]
        if step == self.step_index:
            self.step_ids.update(ids)
        self._retrying(fts_store.mark_submitted, self.run.pk, ids, job_id, self.lease_holder)
        self.jobs[job_id] = _Job(len(jobs), sum(j.size for j in jobs), step)

    def use_tokens(self, tokens: TokenSource) -> None:
        """The run's storage tokens (campaigns.runs.tokens.RunTokens), sent with each job."""
        self.token_for = tokens.token_for

    def _options(self, step: int) -> JobOptions:
        """The job parameters of a step: its sweep point's streams and TCP buffer."""
        if not self.spec.sweep:
            return self.options
        point = self.spec.point_of(step)
        return replace(self.options, nostreams=point.streams, buffer_size=point.tcp_buffer_size)

    def collect(self, now: float, *, idle: bool, stopping: bool) -> Collected:
        out = Collected()
        interval = STOPPING_POLL_SECONDS if stopping else self.fts.poll_seconds
        if not self.in_force and not self.no_evolution and not stopping and now - self.last_check >= interval:
            self.last_check = now
            self._check_in_force()
        if self.jobs and now - self.last_poll >= interval:
            self.last_poll = now
            self._poll(out)
        elif idle:
            time.sleep(TICK_SECONDS)
        return out

    def outstanding(self) -> int:
        return sum(job.rows for job in self.jobs.values())

    def unstarted(self, step: int) -> int:
        # A file-bounded step ends only once FTS started all its files: re-pinning the link
        # earlier would run them at the next step's concurrency.
        return sum(job.unstarted for job in self.jobs.values() if job.step == step)

    def copying(self) -> int:
        return max(self.outstanding() - sum(job.unstarted for job in self.jobs.values()), 0)

    def in_flight(self) -> list[tuple[int, float]]:
        return list(self.active.items())

    def step_files(self, index: int, planned: int, claimed: int) -> int:
        """How many files step `index` hands out: its plan (the campaign's step_files) and the
        measure_files the FTS options add for the warm-up before FTS runs the step at its
        concurrency (it applies a link limit only at its optimizer's next pass), exactly that
        many whatever the optimizer does. A total that followed the files claimed so far ran
        away: a x2 step of 30 + 12 took 60 and 85 files, and the x4 step after it had none."""
        return planned + self.measure_files if self.measure_files else planned

    def give_back_unstarted(self) -> list[CopyJob]:
        # FTS holds its own queue: a file it has not started cannot be taken back without
        # cancelling its job, so a timed step's end is approximate here (docs/fts.md).
        return []

    def cancel(self, abort_running: bool) -> None:
        # DELETE of the run's jobs: their files come back CANCELED and are recorded.
        if self.cancel_sent or not self.jobs:
            return
        try:
            self.client.cancel(list(self.jobs))
        except FtsError as exc:
            log.warning("run %s: cancelling FTS jobs failed, will retry: %s", self.run.pk, exc)
            return
        self.cancel_sent, self.cancel_sent_at = True, datetime.now(UTC)

    def close(self) -> None:
        return None

    def finish(self) -> dict:
        run = self.run
        problems = []
        if self.manage_links or run.fts_link_limits.exists():
            errors = fts_links.restore(self.client, run)
            if errors:
                problems.append(f"{len(errors)} FTS link limit(s) not restored")
        report: dict = {}
        run.refresh_from_db(fields=["started_at"])
        if run.started_at:
            try:
                report = fts_links.read_fts_side(
                    self.client, run, fts_links.run_links(run), run.started_at, timezone.now()
                )
            except FtsError as exc:
                report = {"error": str(exc)}
        fts = {
            **report,
            "instance": self.fts.name,
            "jobs": fts_store.run_jobs(run.pk),
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
        return {"fts": fts, "problems": problems}

    def crashed(self) -> None:
        if self.run.fts_link_limits.filter(restored_at__isnull=True).exists():
            fts_links.restore(self.client, self.run)

    # -- polling ------------------------------------------------------------------------------
    def _check_in_force(self) -> None:
        try:
            answer = fts_links.in_force(self.client, self.run, self.links, self.pinned)
        except FtsError as exc:
            log.warning("run %s: reading FTS's optimizer evolution failed, will retry: %s", self.run.pk, exc)
            return
        if answer is None:
            # Nothing says when FTS obeys the range: StorageOps holds every step itself.
            log.warning("run %s: FTS has no optimizer evolution; steps are held by StorageOps", self.run.pk)
            self.no_evolution = True
        self.in_force = bool(answer)

    def _final_files(self, files: list[dict], now: float) -> tuple[list, list]:
        """The files FTS reports final, ready to record, and those that still wait for their
        finish time (cancelled while copying; at most CANCEL_FINISH_WAIT)."""
        final, waiting = [], []
        for entry in files:
            if entry.get("file_state") not in FINAL_FILE_STATES:
                continue
            outcome = file_outcome(entry)
            if outcome.state == "CANCELED" and outcome.finish_time is None:
                seen = self.cancel_seen.setdefault(outcome.file_id, now)
                if now - seen < CANCEL_FINISH_WAIT:
                    waiting.append(outcome)
                    continue
                outcome = replace(
                    outcome,
                    finish_time=datetime.fromtimestamp(seen, UTC),
                    reason=outcome.reason + NO_FINISH_NOTE.format(CANCEL_FINISH_WAIT),
                )
            final.append(outcome)
        return final, waiting

    def _poll(self, out: Collected) -> None:
        try:
            statuses = self.client.jobs(list(self.jobs))
        except FtsError as exc:
            # FTS unreachable or overloaded: the jobs go on over there; ask again next time.
            log.warning("run %s: polling FTS failed: %s", self.run.pk, exc)
            return
        for status in statuses:
            job_id = status.get("job_id")
            job = self.jobs.get(job_id)
            if job is None:
                continue
            if str(status.get("http_status", "")).startswith("404"):
                # Gone on FTS (purged, or another FTS behind the alias): its rows are closed at the end.
                log.warning("run %s: FTS does not know job %s any more", self.run.pk, job_id)
                self._forget(job_id, out)
                continue
            files = status.get("files", [])
            job.unstarted = sum(1 for f in files if f.get("file_state") == "SUBMITTED")
            self._note_active(files)
            final, waiting = self._final_files(files, time.time())
            self._look_early(waiting)
            if final:
                complete = self._complete_on_destination(final)
                delta = self._retrying(
                    fts_store.record_files, self.run.pk, final, job_id, self.lease_holder, complete,
                    self._cancel_time(final), self.spec.checksum_algorithm,
                )  # fmt: skip
                out.done += delta["done"]
                out.failed += delta["failed"]
                out.skipped += delta["skipped"]
                out.cancelled += delta["cancelled"]
                if delta["bytes"]:
                    out.moved.append((time.time(), delta["bytes"]))
                out.returned += delta["written"]
                out.returned_bytes += delta["planned_bytes"]
                job.rows -= delta["written"]
                job.bytes -= delta["planned_bytes"]
            if status.get("job_state") in FINAL_JOB_STATES and not waiting:
                # Every file of a final job is final; a row it did not report is closed at the end.
                self._forget(job_id, out)

    def _complete_on_destination(self, final: list) -> dict[int, landed.Found]:
        """Files FTS cancelled after starting them, checked on their destination (landed.py)."""
        copies = self._retrying(fts_store.cancelled_copies, self.run.pk, final)
        if not copies or self.storage is None:
            return {}
        found = landed.examine_all(self.storage(), copies, self.spec.checksum_algorithm.upper())
        for pk, seen in found.items():
            # Whole now, and maybe earlier: the first check that found it so bounds the copy's end.
            early = self.whole_at.pop(pk, None)
            if seen.whole and early is not None:
                found[pk] = seen._replace(checked_at=min(early, seen.checked_at or early))
        return found

    def _look_early(self, waiting: list) -> None:
        """Copies FTS has marked CANCELED and not yet killed (no finish time): each poll, whether
        each is whole on its destination yet. The first time one is bounds when it ended, where
        FTS's finish time (its kill) comes seconds later; the check after the kill decides."""
        pending = [o for o in waiting if o.transfer_id is not None and o.transfer_id not in self.whole_at]
        if not pending or self.storage is None:
            return
        copies = self._retrying(fts_store.cancelled_copies, self.run.pk, pending)
        if not copies:
            return
        found = landed.examine_all(self.storage(), copies, self.spec.checksum_algorithm.upper())
        for pk, seen in found.items():
            if seen.whole:
                self.whole_at[pk] = seen.checked_at

    def _cancel_time(self, final: list) -> datetime | None:
        """When the cancel went to FTS, for the notes of the files it cancelled; a driver that
        took the run over after it was sent knows only when the operator asked for it."""
        if self.cancel_sent_at is not None or not any(o.state == "CANCELED" for o in final):
            return self.cancel_sent_at
        self.run.refresh_from_db(fields=["cancel_requested_at"])
        return self.run.cancel_requested_at

    def _note_active(self, files: list[dict]) -> None:
        """Remember FTS's own start time of each file it reports ACTIVE; forget the others."""
        started, other = active_starts(files)
        for transfer_id in other:
            self.active.pop(transfer_id, None)
        self.active.update(started)
        self._note_target()

    def _note_target(self) -> None:
        """The step's measurement starts the first time FTS has as many of its copies in flight as
        its concurrency: at the start time (FTS's) of the copy that brought them there."""
        if self.measured_from is not None or not self.step_concurrency:
            return
        starts = sorted(at for pk, at in self.active.items() if pk in self.step_ids)
        if len(starts) < self.step_concurrency:
            return
        self.measured_from = starts[self.step_concurrency - 1]
        self._retrying(fts_store.mark_measured, self.run.pk, self.step_index, self.measured_from)

    def _forget(self, job_id: str, out: Collected) -> None:
        job = self.jobs.pop(job_id)
        out.returned += job.rows
        out.returned_bytes += job.bytes

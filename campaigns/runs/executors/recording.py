"""Finished attempts written back in batches: what every in-process executor (a copy pool in
this worker, or a pool of client hosts) does with the results it holds."""

from __future__ import annotations

from campaigns.runs import storage_faults, store
from campaigns.runs.engines.copies import CopyResult
from campaigns.runs.executors.base import Collected
from campaigns.runs.outages import retrying
from campaigns.spec import RunSpec

FLUSH_ROWS = 1000
FLUSH_SECONDS = 0.25


class Recorder:
    def __init__(self, run_id: int, spec: RunSpec, lease_holder: str) -> None:
        self.run_id, self.lease_holder = run_id, lease_holder
        self.retries, self.retry_delay = spec.retries, spec.retry_delay
        self.pending: list[CopyResult] = []
        self.last_flush = 0.0

    def add(self, got: list[CopyResult], out: Collected) -> None:
        """Hold these results for the next flush, and count them as returned in `out`."""
        for r in got:
            out.returned += 1
            out.returned_bytes += r.job.size
            if r.ok:
                out.moved.append((r.finished, r.bytes))
        self.pending.extend(got)

    def flush(self, now: float, out: Collected, *, stopping: bool) -> None:
        """Write what is held when enough is, or long enough, or the run stops; counters into `out`."""
        if not self.pending or not (
            len(self.pending) >= FLUSH_ROWS or now - self.last_flush >= FLUSH_SECONDS or stopping
        ):
            return
        delta = retrying(
            self.run_id,
            store.record,
            self.run_id,
            self.pending,
            self.retries,
            executor=self.lease_holder,
            retry_delay=self.retry_delay,
        )
        out.done, out.failed, out.cancelled, out.requeued = (
            delta["done"],
            delta["failed"],
            delta["cancelled"],
            delta["requeued"],
        )
        # A full disk or a hung door, once per episode on the event log, not a copy error each.
        # A success ends an episode this process has open (the disk had room again).
        if storage_faults.has_open() or any(not r.ok and r.category in storage_faults.WHAT for r in self.pending):
            retrying(self.run_id, storage_faults.note_failures, self.run_id, self.pending)
        self.pending = []
        self.last_flush = now

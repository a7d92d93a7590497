"""The one interface between the run lifecycle and an engine.

The lifecycle (campaigns.runs.lifecycle) owns everything a run is: its lease, steps,
budgets, cancel, progress, finish and crash. An executor owns only how copies happen: it
takes claimed jobs, runs them (a pool of gfal2 threads, FTS jobs, checksum requests),
writes each finished attempt into its Transfer row and reports what came back. The
lifecycle never asks which engine it drives.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from campaigns.runs.engines.copies import CopyJob


class ExecutorFailed(Exception):
    """The engine refused the run (credentials, delegation, a link limit it may not set):
    retrying will not help, so the run stops as failed with this message."""


@dataclass
class Collected:
    """What came back from the executor since the last call, already written to the rows.

    returned: jobs handed out earlier that are no longer the executor's (recorded final,
    requeued for a retry, or forgotten), with their planned bytes; moved: (epoch, bytes) of
    successful copies, for throughput and byte budgets; done/failed/skipped/cancelled: counter
    deltas of what was recorded final (skipped: never started; cancelled: stopped under way);
    requeued: attempts that went back to the queue to be retried.
    """

    returned: int = 0
    returned_bytes: int = 0
    moved: list[tuple[float, int]] = field(default_factory=list)
    done: int = 0
    failed: int = 0
    skipped: int = 0
    cancelled: int = 0
    requeued: int = 0

    @property
    def moved_bytes(self) -> int:
        return sum(b for _, b in self.moved)

    def __bool__(self) -> bool:
        return bool(self.returned or self.done or self.failed or self.skipped or self.cancelled or self.requeued)


class Executor(Protocol):
    # How many jobs the lifecycle claims at once at most, and the fewest worth a claim
    # round trip when one was just made.
    batch_size: int
    min_claim: int

    def resume(self) -> str:
        """Take over what a previous driver left in flight; returns a line for the log."""

    def on_step(self, index: int, concurrency: int) -> None:
        """A new step is in force: copies may run `concurrency` at a time from now on."""

    def room(self, concurrency: int) -> int:
        """How many more jobs it can take now without exceeding the step's concurrency."""

    def submit(self, jobs: list[CopyJob], step: int) -> None:
        """Start (or queue) these claimed jobs; raises ExecutorFailed when the engine refuses."""

    def collect(self, now: float, *, idle: bool, stopping: bool) -> Collected:
        """Record what finished; waits a little when the last round did nothing (idle)."""

    def outstanding(self) -> int:
        """Jobs handed out and not yet recorded: the run may finish when this is 0."""

    def unstarted(self, step: int) -> int:
        """Jobs of `step` handed out but not started by the engine yet."""

    def copying(self) -> int:
        """Copies under way this moment (what the dashboard's 'in flight' shows)."""

    def in_flight(self) -> list[tuple[int, float]]:
        """(transfer id, epoch it started) of the copies under way, as far as the engine knows."""

    def give_back_unstarted(self) -> list[CopyJob]:
        """Take back the jobs not started (a timed step's end, a stop); the lifecycle requeues them."""

    def cancel(self, abort_running: bool) -> None:
        """Start nothing more; with abort_running, also abort the copies under way."""

    def close(self) -> None:
        """Release threads and connections (also after a crash)."""

    def finish(self) -> dict:
        """Undo what the run changed on the engine's side (FTS link limits) and return the
        engine's extras for the run's results (e.g. {"fts": FTS's own record}), with
        "problems": lines the run's stop reason should carry. Called once at the end."""

    def crashed(self) -> None:
        """Best effort after a crash: undo what the run changed on the engine's side."""

"""A pool of copy threads whose size *is* the concurrency of the current step.

The run driver keeps a few more jobs queued than threads exist, so a thread that finishes
a copy starts the next one at once instead of waiting for the driver's next database
round trip; the number of threads alone bounds how many copies run at the same time.

Every copy has a deadline StorageOps enforces itself, whatever the engine does: gfal2 copies
were seen to stay in filecopy for minutes past their own timeout (a restarted door, a closed
port) and checksum requests on root:// cannot be interrupted at all. At the deadline the
copy's context is cancelled; a copy that still has not returned a little later is given up:
its result is written as a timeout, its thread is left to finish alone (its late result is
dropped) and a new thread takes its slot, so the step keeps its concurrency.
"""

from __future__ import annotations

import errno
import queue
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Protocol

from campaigns.runs.engines.copies import CopyJob, CopyResult
from campaigns.runs.executors.deadline import GIVE_UP, in_background

_IDLE_POLL = 0.2


class Copier(Protocol):
    """What an engine hands the copy threads: one copy per call, safe from many threads at once."""

    # What a copy stopped at StorageOps' deadline is recorded as.
    timeout_category: str

    def copy(self, job: CopyJob) -> CopyResult:
        """Copy one file and say how it went; an engine's error is a failed result, not an exception."""

    def cancel_thread(self, ident: int) -> bool:
        """Abort the copy the thread `ident` runs (its deadline passed); False if it runs none."""

    def cancel_all(self) -> int:
        """Abort every copy under way (a cancel of the run); returns how many."""


@dataclass
class _Slot:
    """The copy a thread is running: when it began, and what the deadline did to it."""

    job: CopyJob
    started: float  # epoch, for the record
    tick: float  # monotonic, for the deadline
    cancelled_at: float | None = None
    given_up: bool = False


class CopyThreads:
    def __init__(self, copier: Copier, deadline: float | None = None) -> None:
        """deadline: seconds a copy may run before StorageOps cancels it (None: no deadline)."""
        self.copier = copier
        self.deadline = deadline
        self._slots: dict[int, _Slot] = {}  # thread ident -> its copy
        self._given_up: set[int] = set()  # threads whose copy was given up: never waited for
        self._size = 0
        self.work: queue.SimpleQueue[CopyJob | None] = queue.SimpleQueue()
        self.results: queue.SimpleQueue[CopyResult] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._alive = 0
        self._retire = 0
        self._copying = 0
        self._started: Counter[int] = Counter()  # step index -> copies started
        self._closed = threading.Event()
        self._gate = threading.Event()  # cleared while a step's copies wait to start together
        self._gate.set()
        self._held = 0  # threads waiting at the gate with a job

    # -- size -------------------------------------------------------------------------------
    def resize(self, size: int) -> None:
        """Grow at once; shrink as threads finish their current copy."""
        with self._lock:
            self._size = size
            effective = self._alive - self._retire
            if size <= effective:
                self._retire += effective - size
                return
            # Threads told to retire but still busy are kept rather than replaced.
            kept = min(self._retire, size - effective)
            self._retire -= kept
            missing = size - effective - kept
            self._alive += missing
        for _ in range(missing):
            thread = threading.Thread(target=self._run, name=f"copy-{len(self._threads)}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def _run(self) -> None:
        while not self._closed.is_set():
            with self._lock:
                if self._retire:
                    self._retire -= 1
                    self._alive -= 1
                    return
            try:
                job = self.work.get(timeout=_IDLE_POLL)
            except queue.Empty:
                continue
            if job is None:  # close() wakes idle threads with one None each
                break
            with self._lock:
                if self._retire:
                    # Told to retire while it waited for work (a step of lower concurrency began):
                    # it hands the job back to a thread that stays. Checking only between jobs let
                    # an idle thread take one first, and a step at 1 ran two copies at once.
                    self._retire -= 1
                    self._alive -= 1
                    self.work.put(job)
                    return
            # A step that starts together: every thread waits here, job in hand, for the word.
            if not self._gate.is_set():
                with self._lock:
                    self._held += 1
                while not self._gate.wait(_IDLE_POLL) and not self._closed.is_set():
                    pass
                with self._lock:
                    self._held -= 1
            slot = _Slot(job, time.time(), time.monotonic())
            me = threading.get_ident()
            with self._lock:
                self._copying += 1
                self._started[job.step] += 1
                self._slots[me] = slot
            try:
                result = self.copier.copy(job)
            except Exception as exc:  # noqa: BLE001 - an engine bug must not lose the transfer
                now = time.time()
                result = CopyResult(job, False, now, now, 0.0, message=f"engine error: {exc!r}", category="other")
            with self._lock:
                self._slots.pop(me, None)
                if slot.given_up:
                    # Its timeout was recorded and its slot given to a new thread: this one just ends.
                    return
                self._copying -= 1
            if slot.cancelled_at is not None and not result.ok:
                result = self._timed_out(slot, result)
            self.results.put(result)
        with self._lock:
            self._alive -= 1

    # -- starting together ----------------------------------------------------------------------
    def hold(self) -> None:
        """Threads that take a job wait with it until release(): a step's copies begin at once."""
        self._gate.clear()

    def release(self) -> None:
        self._gate.set()

    def holding(self) -> bool:
        return not self._gate.is_set()

    def ready(self) -> int:
        """Threads with a job in hand waiting at the gate."""
        with self._lock:
            return self._held

    # -- deadlines ----------------------------------------------------------------------------
    def enforce_deadlines(self) -> int:
        """Cancel copies past their deadline; give up on those that ignored the cancel.
        Called from the driver's loop; returns how many copies it acted on."""
        if not self.deadline:
            return 0
        now = time.monotonic()
        cancel, give_up = [], []
        with self._lock:
            for ident, slot in self._slots.items():
                if slot.cancelled_at is None and now - slot.tick >= self.deadline:
                    slot.cancelled_at = now
                    cancel.append(ident)
                elif slot.cancelled_at is not None and not slot.given_up and now - slot.cancelled_at >= GIVE_UP:
                    slot.given_up = True
                    self._copying -= 1
                    self._alive -= 1
                    self._given_up.add(ident)
                    give_up.append(slot)
        for ident in cancel:
            in_background(self.copier.cancel_thread, ident)
        for slot in give_up:
            self.results.put(self._timed_out(slot, None))
        if give_up and not self._closed.is_set():
            self.resize(self._size)  # new threads for the slots given up
        return len(cancel) + len(give_up)

    def _timed_out(self, slot: _Slot, result: CopyResult | None) -> CopyResult:
        """The record of a copy StorageOps stopped at its deadline: a timeout, with what the
        engine said (if it said anything) kept in the message."""
        now = time.time()
        said = f"; the engine said: {result.message}" if result is not None and result.message else ""
        ended = "was cancelled" if result is not None else "ignored the cancel and was given up"
        return CopyResult(
            slot.job,
            False,
            slot.started,
            now,
            now - slot.started,
            code=errno.ETIMEDOUT,
            message=f"No result within StorageOps' {self.deadline:.0f} s deadline: the copy {ended}{said}",
            category=self.copier.timeout_category,
            copy_mode=result.copy_mode if result is not None else "",
            source_checksum=slot.job.checksum,
        )

    # -- jobs ---------------------------------------------------------------------------------
    def submit(self, jobs: list[CopyJob]) -> None:
        for job in jobs:
            self.work.put(job)

    def waiting(self) -> int:
        return self.work.qsize()

    def copying(self) -> int:
        """Copies under way this moment: finished ones waiting for the driver to record them
        are not counted, so the figure never exceeds the threads even when the driver lags."""
        with self._lock:
            return self._copying

    def in_flight(self) -> list[tuple[int, float]]:
        """(transfer id, epoch it began) of every copy under way: what the live page lists."""
        with self._lock:
            return [(slot.job.id, slot.started) for slot in self._slots.values() if not slot.given_up]

    def started(self, step: int) -> int:
        """How many copies of `step` a thread has begun (what a step's end waits for)."""
        with self._lock:
            return self._started[step]

    def take_unstarted(self) -> list[CopyJob]:
        """Take back the jobs no thread has started (at a step change or a stop)."""
        jobs = []
        try:
            while True:
                job = self.work.get_nowait()
                if job is not None:
                    jobs.append(job)
        except queue.Empty:
            return jobs

    def collect(self, block: float) -> list[CopyResult]:
        got: list[CopyResult] = []
        try:
            if block:
                got.append(self.results.get(timeout=block))
            while True:
                got.append(self.results.get_nowait())
        except queue.Empty:
            return got

    def cancel_running(self) -> None:
        in_background(self.copier.cancel_all)

    def close(self, timeout: float = 5.0) -> None:
        """Stop the threads; waits `timeout` seconds in all (a copy given up may never return)."""
        self._closed.set()
        for _ in self._threads:
            self.work.put(None)
        end = time.monotonic() + timeout
        for thread in self._threads:
            if thread.ident not in self._given_up:
                thread.join(timeout=max(end - time.monotonic(), 0.0))

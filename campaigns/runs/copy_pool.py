"""A pool of copy threads whose size *is* the concurrency of the current step.

The run driver keeps a few more jobs queued than threads exist, so a thread that finishes
a copy starts the next one at once instead of waiting for the driver's next database
round trip; the number of threads alone bounds how many copies run at the same time.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import Counter

from campaigns.runs.engines.base import CopyJob, CopyResult

_IDLE_POLL = 0.2


class CopyPool:
    def __init__(self, copier) -> None:
        self.copier = copier
        self.work: queue.SimpleQueue[CopyJob | None] = queue.SimpleQueue()
        self.results: queue.SimpleQueue[CopyResult] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._alive = 0
        self._retire = 0
        self._copying = 0
        self._started: Counter[int] = Counter()  # step index -> copies started
        self._closed = threading.Event()

    # -- size -------------------------------------------------------------------------------
    def resize(self, size: int) -> None:
        """Grow at once; shrink as threads finish their current copy."""
        with self._lock:
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
                self._copying += 1
                self._started[job.step] += 1
            try:
                result = self.copier.copy(job)
            except Exception as exc:  # noqa: BLE001 - an engine bug must not lose the transfer
                now = time.time()
                result = CopyResult(job, False, now, now, 0.0, message=f"engine error: {exc!r}", category="other")
            finally:
                with self._lock:
                    self._copying -= 1
            self.results.put(result)
        with self._lock:
            self._alive -= 1

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

    def cancel_running(self) -> int:
        return self.copier.cancel_all()

    def close(self, timeout: float = 5.0) -> None:
        self._closed.set()
        for _ in self._threads:
            self.work.put(None)
        for thread in self._threads:
            thread.join(timeout=timeout)

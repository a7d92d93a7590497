"""A toy engine, registered by the test suite alone: it proves that an engine is one package and
one registry call (docs/architecture.md, "Add an engine"), and the engine contract tests run on
it as on gfal2 and FTS.

Its copies are simulated in the driver's own thread: a copy "takes" the seconds the
destination URL's query names (time=N, as gfal2's mock plugin reads it) and then succeeds with
the planned size. Everything else is the real thing: the Transfer rows, the batched recording
(campaigns.runs.executors.recording), the lifecycle around it.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from urllib.parse import parse_qs, urlsplit

from campaigns.choices import ErrorCategory
from campaigns.models import Run
from campaigns.models.engine_registry import EngineEntry, register_engine, unregister_engine
from campaigns.runs import store
from campaigns.runs.engines.copies import CopyJob, CopyResult
from campaigns.runs.executors.base import Collected
from campaigns.runs.executors.recording import Recorder
from campaigns.runs.outages import retrying
from campaigns.spec import RunSpec

NAME = "toy"
IDLE_WAIT = 0.01


def copy_seconds(url: str) -> float:
    values = parse_qs(urlsplit(url).query).get("time") or ["0"]
    return float(values[0])


class ToyExecutor:
    batch_size = 64
    min_claim = 1

    def __init__(self, run: Run, *, lease_holder: str) -> None:
        self.run_id = run.pk
        self.recorder = Recorder(run.pk, RunSpec.of(run), lease_holder)
        self.running: dict[int, tuple[CopyJob, float, float]] = {}  # id -> job, started epoch, due (monotonic)
        self.aborted: list[CopyResult] = []  # copies a cancel stopped, returned at the next collect
        self.cancelled = False

    def resume(self) -> str:
        orphans = retrying(self.run_id, store.requeue_orphans, self.run_id)
        return f"{orphans} in-flight transfers requeued for a retry"

    def on_step(self, index: int, concurrency: int) -> None:
        return None

    def room(self, concurrency: int) -> int:
        return 0 if self.cancelled else concurrency - len(self.running)

    def submit(self, jobs: list[CopyJob], step: int) -> None:
        now = time.monotonic()
        for job in jobs:
            self.running[job.id] = (job, time.time(), now + copy_seconds(job.destination))

    def _result(self, job: CopyJob, started: float, *, ok: bool) -> CopyResult:
        finished = time.time()
        return CopyResult(
            job=job,
            ok=ok,
            started=started,
            finished=finished,
            duration=finished - started,
            code=None if ok else 125,
            message="" if ok else "cancelled by the toy engine",
            category="" if ok else ErrorCategory.CANCELLED,
        )

    def collect(self, now: float, *, idle: bool, stopping: bool) -> Collected:
        if idle and self.running:
            time.sleep(IDLE_WAIT)
        due = time.monotonic()
        done = [key for key, (_, _, until) in self.running.items() if until <= due]
        got = [self._result(*self.running.pop(key)[:2], ok=True) for key in done] + self.aborted
        self.aborted = []
        out = Collected()
        self.recorder.add(got, out)
        self.recorder.flush(now, out, stopping=stopping)
        return out

    def outstanding(self) -> int:
        return len(self.running) + len(self.aborted) + len(self.recorder.pending)

    def unstarted(self, step: int) -> int:
        return 0  # a toy copy starts when it is submitted

    def copying(self) -> int:
        return len(self.running)

    def in_flight(self) -> list[tuple[int, float]]:
        return [(key, started) for key, (_, started, _) in self.running.items()]

    def give_back_unstarted(self) -> list[CopyJob]:
        return []

    def cancel(self, abort_running: bool) -> None:
        self.cancelled = True
        if abort_running:
            self.aborted += [self._result(job, started, ok=False) for job, started, _ in self.running.values()]
            self.running.clear()

    def close(self) -> None:
        self.running.clear()

    def finish(self) -> dict:
        return {}

    def crashed(self) -> None:
        return None


def build_executor(run: Run, lease_holder: str, copier_factory=None) -> ToyExecutor:
    return ToyExecutor(run, lease_holder=lease_holder)


def categorize(code: int | None, message: str) -> str:
    return ErrorCategory.CANCELLED if "cancel" in message.lower() else ErrorCategory.OTHER


ENTRY = EngineEntry(name=NAME, label="Toy", build_executor=build_executor, categorize=categorize)


@contextmanager
def toy_engine_registered():
    """The toy engine, registered for the length of a test (the registry is process-wide)."""
    register_engine(ENTRY)
    try:
        yield ENTRY
    finally:
        unregister_engine(NAME)

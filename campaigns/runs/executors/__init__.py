"""The executors behind the one run lifecycle: gfal2 copies (or checksum requests) in a
pool of threads, or FTS jobs. `build_executor` picks one from the run's spec."""

from __future__ import annotations

from collections.abc import Callable

from campaigns.models import Run
from campaigns.runs.executors.base import Collected, Executor, ExecutorFailed
from campaigns.runs.executors.copies import CopyPoolExecutor, build_copier
from campaigns.runs.executors.fts import FtsExecutor, build_client
from campaigns.runs.executors.pool import ClientPoolExecutor
from campaigns.spec import RunSpec

__all__ = ["Collected", "Executor", "ExecutorFailed", "build_client", "build_copier", "build_executor"]


def build_executor(
    run: Run, executor_id: str, *, copier_factory: Callable = build_copier, client_factory: Callable = build_client
) -> Executor:
    spec = RunSpec.of(run)
    if spec.is_fts:
        return FtsExecutor(run, client_factory(run.snapshot), executor_id=executor_id)
    if spec.clients:
        return ClientPoolExecutor(run, executor_id=executor_id)
    return CopyPoolExecutor(run, copier_factory(run.snapshot), executor_id=executor_id)

"""The gfal2 engine's entry in the engine registry: copies made by gfal2 in the driving
worker's copy threads, or, for a campaign with a client pool, on its client hosts."""

from __future__ import annotations

from collections.abc import Callable

from campaigns.models import Run
from campaigns.models.engine_registry import EngineEntry, register_engine
from campaigns.runs.engines.errors import categorize
from campaigns.runs.engines.gfal2.client_pool_executor import ClientPoolExecutor
from campaigns.runs.engines.gfal2.executor import build_copier
from campaigns.runs.engines.gfal2.modes import mode_error
from campaigns.runs.executors.in_process import CopyThreadsExecutor
from campaigns.spec import RunSpec

NAME = "gfal2"


def build_executor(run: Run, lease_holder: str, copier_factory: Callable = build_copier):
    if RunSpec.of(run).clients:
        return ClientPoolExecutor(run, lease_holder=lease_holder)
    return CopyThreadsExecutor(run, copier_factory(run.snapshot), lease_holder=lease_holder)


ENTRY = register_engine(
    EngineEntry(
        name=NAME,
        label="gfal2",
        build_executor=build_executor,
        categorize=categorize,
        client_pool=True,
        copy_mode_error=mode_error,
    )
)

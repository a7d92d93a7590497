"""What every engine's executor holds to the run lifecycle (`base`), and the batched recording
shared by the executors that copy in process (`recording`). The executor of a run is its
engine's: the lifecycle asks the engine registry (campaigns.models.engine_registry)."""

from campaigns.runs.executors.base import Collected, Executor, ExecutorFailed

__all__ = ["Collected", "Executor", "ExecutorFailed"]

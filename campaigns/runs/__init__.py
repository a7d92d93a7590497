"""Running campaigns: starting and cancelling runs, the one run lifecycle and its executors.

The names most callers need (start, cancel, leases) are re-exported here so that views,
the API and tasks say `runs.start_run(...)`; the driver itself is `campaigns.runs.lifecycle`.
"""

from campaigns.runs.leases import acquire_lease, executor_id, recover_stale_runs, renew_lease, stale_run_ids
from campaigns.runs.retrying_failed import retry_failed, retryable_count
from campaigns.runs.starting import (
    check_runnable,
    command_starter,
    create_run,
    current_state,
    dispatch,
    request_cancel,
    start_run,
)

__all__ = [
    "acquire_lease",
    "check_runnable",
    "command_starter",
    "create_run",
    "current_state",
    "dispatch",
    "executor_id",
    "recover_stale_runs",
    "renew_lease",
    "request_cancel",
    "retry_failed",
    "retryable_count",
    "stale_run_ids",
    "start_run",
]

"""Running campaigns: starting and cancelling runs, the one run lifecycle and its executors.

The names most callers need (start, cancel, leases) are re-exported here so that views,
the API and tasks say `runs.start_run(...)`; the driver itself is `campaigns.runs.lifecycle`.

They are loaded on first use (PEP 562), not when the package is imported: an engine with
models of its own is a Django app inside this package (campaigns.runs.engines.fts), and
Django imports an app's package before any model may be defined, so importing this package
must not import models.
"""

# The imports under TYPE_CHECKING are re-exported through __getattr__, which ruff cannot see.
# ruff: noqa: F401

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the names below, for type checkers and the architecture test's import graph
    from campaigns.runs.leases import acquire_lease, lease_holder_id, recover_stale_runs, renew_lease, stale_run_ids
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

_MODULE_OF = {
    "acquire_lease": "leases",
    "lease_holder_id": "leases",
    "recover_stale_runs": "leases",
    "renew_lease": "leases",
    "stale_run_ids": "leases",
    "retry_failed": "retrying_failed",
    "retryable_count": "retrying_failed",
    "check_runnable": "starting",
    "command_starter": "starting",
    "create_run": "starting",
    "current_state": "starting",
    "dispatch": "starting",
    "request_cancel": "starting",
    "start_run": "starting",
}

__all__ = sorted(_MODULE_OF)


def __getattr__(name: str):
    # Anything else (a submodule not imported yet) is an AttributeError, so that `from
    # campaigns.runs import store` goes on to import the submodule.
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value

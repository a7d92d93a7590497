"""How a run ended, decided once: the one rule every engine, page and export agrees on.

A run is succeeded only when every planned transfer succeeded. A stop that was a cancel
stays cancelled, and a stop that was a failure (the engine refused, the run could not
start) stays failed. Otherwise a run in which nothing succeeded failed, and a run in which
some but not all planned transfers succeeded is partial: failed copies and planned
transfers never tried (a byte or duration budget reached, a sweep that ended with files
left) both count as not succeeded. The stop reason says which budget or stop it was.
"""

from __future__ import annotations

from campaigns.choices import RunState


def run_outcome(stop_state: str, planned: int, done: int, failed: int, skipped: int) -> str:
    """The final state of a run that stopped as `stop_state` (succeeded for any stop that was
    neither a cancel nor a failure) with `done` of `planned` transfers succeeded, `failed`
    failed and `skipped` not tried (planned - done - failed: what is still queued or active
    is closed as skipped after this decision)."""
    if stop_state in (RunState.CANCELLED, RunState.FAILED):
        return stop_state
    if done >= planned and not failed and not skipped:
        return RunState.SUCCEEDED
    if done == 0:
        return RunState.FAILED
    return RunState.PARTIAL


def failure_reason(planned: int, failed: int, skipped: int, errors: dict[str, int], stopped: str) -> str:
    """The stop reason of a run that failed because nothing succeeded: what failed, not how the
    sweep ended ("concurrency sweep completed" read as success on a failed run). `errors` is the
    failed copies' count per error category, the most common first; `stopped` the stop's own
    reason, kept after the failure."""
    if failed:
        mix = ", ".join(f"{category} {n}" for category, n in list(errors.items())[:3])
        text = f"every copy failed: {failed} of {planned}" + (f" ({mix})" if mix else "")
    else:
        text = f"no copy succeeded: {skipped} of {planned} never ran"
    return f"{text}; {stopped}" if stopped else text

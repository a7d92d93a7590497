"""How a run ended, decided once: the one rule every engine, page and export agrees on.

A run is succeeded only when every transfer it needed succeeded and every step it planned ran.
A stop that was a cancel stays cancelled, and a stop that was a failure (the engine refused,
the run could not start) stays failed. Otherwise a run in which nothing succeeded failed, and a
run with a shortfall is partial: failed copies, planned transfers never tried (a byte or
duration budget reached, a sweep that ended with files left) and planned steps that never ran
all count. The one exception is a sweep of time-bounded steps that ran every step to its end:
its steps took what their time allowed, so the files of the pool no step reached were not
needed, and they are no shortfall. The stop reason says which budget or stop it was.
"""

from __future__ import annotations

from campaigns.choices import RunState

# What a transfer of the pool no time-bounded step reached says, in place of the stop reason.
NOT_NEEDED_REASON = "not needed: the sweep's time-bounded steps all ended before one needed this file"


def run_outcome(
    stop_state: str, planned: int, done: int, failed: int, skipped: int, *, not_needed: int = 0, steps_not_run: int = 0
) -> str:
    """The final state of a run that stopped as `stop_state` (succeeded for any stop that was
    neither a cancel nor a failure) with `done` of `planned` transfers succeeded, `failed`
    failed and `skipped` not tried (planned - done - failed: what is still queued or active
    is closed as skipped after this decision), `not_needed` of them never needed (a completed
    sweep of time-bounded steps) and `steps_not_run` of its planned steps never run."""
    if stop_state in (RunState.CANCELLED, RunState.FAILED):
        return stop_state
    shortfall = failed or skipped > not_needed or steps_not_run
    if not shortfall and (done or not planned):
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


def steps_not_run_reason(concurrencies: list[int], planned_steps: int) -> str:
    """What a stop reason adds for planned steps that never ran (their concurrencies, in order)."""
    which = ", ".join(str(c) for c in concurrencies)
    return f"{len(concurrencies)} of {planned_steps} planned steps never ran (concurrency {which})"

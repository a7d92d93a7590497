"""The one rule of how a run ended (campaigns.runs.outcome.run_outcome)."""

from __future__ import annotations

import pytest

from campaigns.choices import FINAL_RUN_STATES, RunState
from campaigns.runs.outcome import run_outcome

S, P, F, C = RunState.SUCCEEDED, RunState.PARTIAL, RunState.FAILED, RunState.CANCELLED


@pytest.mark.parametrize(
    ("stop", "planned", "done", "failed", "skipped", "expected"),
    [
        # Every planned transfer succeeded: the only way to succeed.
        (S, 46, 46, 0, 0, S),
        (S, 0, 0, 0, 0, S),  # nothing was planned, nothing was missed
        # Some succeeded, some not: failed copies, untried ones (budget, sweep end), or both.
        (S, 46, 44, 2, 0, P),
        (S, 46, 40, 0, 6, P),  # a byte or duration budget left 6 untried
        (S, 46, 38, 2, 6, P),
        (S, 46, 45, 0, 1, P),
        # Nothing succeeded.
        (S, 46, 0, 46, 0, F),
        (S, 46, 0, 0, 46, F),  # a budget used up before the first copy
        (S, 46, 0, 3, 43, F),
        # A cancel stays a cancel, a failed stop stays failed, whatever the counts.
        (C, 46, 46, 0, 0, C),
        (C, 46, 10, 2, 34, C),
        (C, 46, 0, 0, 46, C),
        (F, 46, 46, 0, 0, F),
        (F, 46, 20, 0, 26, F),
    ],
)
def test_outcome(stop, planned, done, failed, skipped, expected):
    assert run_outcome(stop, planned, done, failed, skipped) == expected


@pytest.mark.parametrize(
    ("stop", "planned", "done", "failed", "skipped", "not_needed", "steps_not_run", "expected"),
    [
        # A completed sweep of time-bounded steps: the files no step reached are no shortfall.
        (S, 200, 12, 0, 188, 188, 0, S),
        # A failed copy is, and so is a file tried once and left waiting for its retry.
        (S, 200, 11, 1, 188, 188, 0, P),
        (S, 200, 11, 0, 189, 188, 0, P),
        # A planned step that never ran is a shortfall, even with every file done.
        (S, 4, 4, 0, 0, 0, 2, P),
        (S, 200, 0, 0, 200, 200, 0, F),
        (C, 200, 12, 0, 188, 188, 0, C),
    ],
)
def test_outcome_of_a_sweep(stop, planned, done, failed, skipped, not_needed, steps_not_run, expected):
    got = run_outcome(stop, planned, done, failed, skipped, not_needed=not_needed, steps_not_run=steps_not_run)
    assert got == expected


def test_partial_is_final_and_not_live():
    assert RunState.PARTIAL in FINAL_RUN_STATES
    assert RunState("partial").label == "Partial"

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


def test_partial_is_final_and_not_live():
    assert RunState.PARTIAL in FINAL_RUN_STATES
    assert RunState("partial").label == "Partial"

"""Driving a run to its end in the test process (the real driver, on gfal2's mock plugin)."""

from __future__ import annotations

from campaigns import runs
from campaigns.models import Campaign, Run
from campaigns.runs.lifecycle import RunDriver


def drive(campaign: Campaign) -> Run:
    run = runs.create_run(campaign, trigger="command")
    RunDriver(run.pk).drive()
    run.refresh_from_db()
    return run

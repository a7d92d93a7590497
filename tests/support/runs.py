"""Runs for tests: driven to their end in the test process (the real driver, on gfal2's mock
plugin), or left in flight with hand-made steps and copies."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from campaigns import runs
from campaigns.choices import RunState
from campaigns.models import Campaign, Run, RunStep, Transfer, buckets
from campaigns.runs.cleanup import run_folders
from campaigns.runs.lifecycle import RunDriver
from tests.support.factories import mock_campaign

T0 = datetime(2026, 2, 1, 9, 0, 0, tzinfo=UTC)


def drive(campaign: Campaign) -> Run:
    run = runs.create_run(campaign, trigger="command")
    RunDriver(run.pk).drive()
    run.refresh_from_db()
    return run


def running_run(name: str = "fin") -> Run:
    """A run in flight with two steps (concurrency 1 then 2) and five copies, one failed."""
    campaign = mock_campaign(name, file_count=5, concurrency_steps=[1, 2], step_seconds=10, tpc_mode="pull")
    run = runs.create_run(campaign, trigger="command")
    Run.objects.filter(pk=run.pk).update(state=RunState.RUNNING, started_at=T0, active_transfers=3, eta_seconds=9)
    RunStep.objects.create(run=run, index=0, concurrency=1, started_at=T0, ended_at=T0 + timedelta(seconds=10))
    RunStep.objects.create(run=run, index=1, concurrency=2, started_at=T0 + timedelta(seconds=10))
    src, dst = campaign.sources.get(), campaign.destinations.get()
    folder = run_folders(run)[dst.pk]
    for index, (step, start, seconds, state) in enumerate(
        [(0, 0, 4, "succeeded"), (0, 4, 6, "succeeded"), (1, 10, 4, "succeeded"), (1, 11, 4, "succeeded"),
         (1, 12, 1, "failed")]
    ):  # fmt: skip
        Transfer.objects.create(
            run=run, index=index, step=step, source=f"mock://src.test/{index}", destination=f"{folder}f{index:07d}",
            source_endpoint=src, destination_endpoint=dst, size=1_000_000, state=state, attempt=1,
            started_at=T0 + timedelta(seconds=start), finished_at=T0 + timedelta(seconds=start + seconds),
            duration=seconds, bytes_transferred=1_000_000 if state == "succeeded" else 0,
            error_category="" if state == "succeeded" else "checksum_timeout",
        )  # fmt: skip
    # What the recorder does with each copy it makes final: add it to the run's time buckets.
    buckets.add_transfers(list(run.transfers.values_list("id", flat=True)))
    return Run.objects.get(pk=run.pk)

"""The figures of a run, checked against values computed by hand from known transfers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from campaigns.models import Run, RunStep, Transfer
from campaigns.results import analysis
from tests.support.factories import endpoint, mock_campaign

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def _transfer(run, index, step, start, seconds, size, state="succeeded", category="", dst=None):
    src = run.campaign.sources.first()
    dst = dst or run.campaign.destinations.first()
    return Transfer.objects.create(
        run=run, index=index, step=step, source=f"mock://s/{index}", destination=f"mock://d/{index}",
        source_endpoint=src, destination_endpoint=dst, size=size, state=state, attempt=1,
        started_at=T0 + timedelta(seconds=start), finished_at=T0 + timedelta(seconds=start + seconds),
        duration=seconds, bytes_transferred=size if state == "succeeded" else 0, error_category=category,
    )  # fmt: skip


@pytest.fixture
def run():
    campaign = mock_campaign("analysis")
    # A step's concurrency is the one the run's frozen parameters give it.
    parameters = {"tpc_mode": "pull", "concurrency_steps": [1, 2]}
    run = Run.objects.create(campaign=campaign, snapshot={"parameters": parameters})
    RunStep.objects.create(run=run, index=0, concurrency=1, started_at=T0)
    RunStep.objects.create(run=run, index=1, concurrency=2, started_at=T0 + timedelta(seconds=10))
    # Step 0: two 100 MB copies back to back, 0-4 s and 4-10 s: 200 MB over 10 s.
    _transfer(run, 0, 0, 0, 4, 100_000_000)
    _transfer(run, 1, 0, 4, 6, 100_000_000)
    # Step 1: two overlapping copies 10-14 s and 11-15 s, one failure: 200 MB over 5 s.
    _transfer(run, 2, 1, 10, 4, 100_000_000)
    _transfer(run, 3, 1, 11, 4, 100_000_000)
    _transfer(run, 4, 1, 12, 1, 100_000_000, state="failed", category="checksum_timeout")
    _transfer(run, 5, None, 0, 0, 100_000_000, state="skipped")
    return run


def test_step_throughput_is_bytes_over_the_active_window_not_a_mean_of_rates(run):
    summary = analysis.run_summary(run)
    step0, step1 = summary["steps"]
    assert step0["throughput_bps"] == pytest.approx(200e6 / 10)
    assert step1["throughput_bps"] == pytest.approx(200e6 / 5)
    # A mean of per-file rates would claim (25 + 16.7) / 2 MB/s for step 0: not what moved.
    assert step0["concurrency"] == 1 and step1["concurrency"] == 2
    assert step1["files_failed"] == 1 and step1["errors"] == {"checksum_timeout": 1}
    total = summary["total"]
    assert total["throughput_bps"] == pytest.approx(400e6 / 15)
    assert total["success_rate"] == pytest.approx(4 / 5)
    assert total["files_skipped"] == 1
    assert total["duration_p50"] == 4 and total["duration_p95"] == 6


def test_latency_counts_failed_attempts_durations_do_not(run):
    # A request that timed out after 30 s is latency a client saw, not a successful copy's time.
    _transfer(run, 6, 1, 13, 30, 100_000_000, state="failed", category="checksum_timeout")
    step1 = analysis.run_summary(run)["steps"][1]
    assert step1["duration_p95"] == 4  # successes only: 4, 4
    assert step1["latency_p95"] == 30 and step1["latency_p50"] == 4  # 1, 4, 4, 30


def test_per_door_figures_follow_the_working_side(run):
    other = endpoint("analysis-dst2", "mock://dst2.test/data/")
    _transfer(run, 6, 1, 20, 2, 50_000_000, dst=other)
    summary = analysis.run_summary(run)
    assert summary["door_side"] == "destination"
    doors = summary["doors"]
    assert doors["dst2.test"]["bytes"] == 50_000_000
    assert doors["dst.test"]["bytes"] == 400_000_000


def test_throughput_series_spreads_each_copy_over_its_duration(run):
    series = analysis.throughput_series(run, bucket_seconds=5)
    by_bucket = [round(point["bps"]) for point in series]
    # 0-5 s: 100 MB (0-4 s) + 1/6 of 100 MB (4-5 s); 5-10 s: 5/6 of 100 MB.
    assert by_bucket[0] == round((100e6 + 100e6 / 6) / 5)
    assert by_bucket[1] == round((100e6 * 5 / 6) / 5)
    assert sum(point["bps"] * 5 for point in series) == pytest.approx(400e6)


def test_rolling_mean_over_n_buckets():
    assert analysis.rolling_mean([10, 20, 30, 40], n=2) == [10, 15, 25, 35]


def test_percentile_nearest_rank():
    assert analysis.percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 95) == 10
    assert analysis.percentile([1, 2, 3, 4], 50) == 2
    assert analysis.percentile([], 50) is None


def test_a_step_measured_after_its_warm_up_gives_the_throughput_of_its_window(run):
    """Step 1 measured from 12 s (FTS reached its concurrency there) to its drain at 13 s: its
    last copy started at 12 s and the first to end after that (the failure, 12-13 s) freed a slot
    no file was left to fill. The copy 10-14 s counts for its 1 s of 4 in the window (25 MB), the
    copy 11-15 s for its 1 s of 4 (25 MB). The live reading from the time buckets says the same."""
    from campaigns.models import buckets
    from campaigns.results import bucketed

    RunStep.objects.filter(run=run, index=1).update(measured_from=T0 + timedelta(seconds=12))
    buckets.rebuild(run.pk)
    step0, step1 = analysis.run_summary(run)["steps"]
    assert step0["throughput_bps"] == pytest.approx(200e6 / 10) and "measured_bytes" not in step0
    assert step1["files_ok"] == 2 and step1["bytes"] == 200_000_000  # what the step copied, whole
    assert step1["measured_bytes"] == 50_000_000 and step1["window_seconds"] == 1.0
    assert step1["throughput_bps"] == pytest.approx(50e6)
    assert step1["warmup_seconds"] == 2.0 and step1["measured_from"] == (T0 + timedelta(seconds=12)).isoformat()
    # Copies in flight over 12-13 s: all three, for the whole second.
    assert step1["achieved_mean"] == pytest.approx(3.0, abs=1e-3)
    live = {row["step"]: row for row in bucketed.tables(run)["steps"]}
    assert live[1]["throughput_bps"] == pytest.approx(50e6)
    assert live[1]["window_seconds"] == 1.0 and live[1]["measured_bytes"] == 50_000_000
    assert live[1]["achieved_mean"] == pytest.approx(3.0, abs=1e-3)
    assert live[0]["throughput_bps"] == pytest.approx(200e6 / 10)


def test_a_step_is_measured_to_its_drain_not_through_its_tail(run):
    """Step 1 gets a fourth copy 12-18 s: its last start is now 12 s and the first end after it
    13 s (the failure): from there the step has no file left and its copies in flight fall off
    (2, then 1 from 14 s, then 1 until 18 s), which is not what the step ran at. The window ends
    at 13 s; while a copy of the step is still under way it runs to the last end."""
    from campaigns.models import Transfer, buckets
    from campaigns.results import bucketed, concurrency

    late = _transfer(run, 6, 1, 12, 6, 100_000_000)
    RunStep.objects.filter(run=run, index=1).update(measured_from=T0 + timedelta(seconds=11))
    buckets.rebuild(run.pk)
    step1 = analysis.run_summary(run)["steps"][1]
    assert step1["window_seconds"] == 2.0  # 11-13 s, not 11-18 s
    # 11-13 s: 10-14 s (2 s of 4), 11-15 s (2 s of 4), 12-18 s (1 s of 6); the failure moves none.
    expected = 100e6 * 2 / 4 + 100e6 * 2 / 4 + 100e6 * 1 / 6
    assert step1["measured_bytes"] == round(expected)
    # In flight: 2 copies for 11-12 s, 4 for 12-13 s: a mean of 3 (through its tail: 2.0).
    assert step1["achieved_mean"] == pytest.approx(3.0, abs=1e-3)
    live = bucketed.tables(run)["steps"][1]
    assert live["window_seconds"] == 2.0 and live["throughput_bps"] == pytest.approx(expected / 2)
    assert live["achieved_mean"] == pytest.approx(3.0, abs=1e-3)
    # Still copying: no drain yet, the window runs to the last end.
    Transfer.objects.filter(pk=late.pk).update(state="active", finished_at=None)
    assert concurrency.measured_windows(run)[1].until is None


def test_a_measurement_start_inside_a_bucket_counts_the_part_after_it(run):
    """11.5 s falls inside the 1 s bucket 11-12 s: half of that bucket is counted, as half of a
    copy's bytes there lie after it (each copy's bytes spread evenly over its duration). The
    window ends at the step's drain, 13 s (the failure's end, the first after its last start)."""
    from campaigns.models import buckets
    from campaigns.results import bucketed

    RunStep.objects.filter(run=run, index=1).update(measured_from=T0 + timedelta(seconds=11.5))
    buckets.rebuild(run.pk)
    # 10-14 s: 1.5 s of 4 within 11.5-13 s; 11-15 s: 1.5 s of 4.
    expected = 100e6 * 1.5 / 4 + 100e6 * 1.5 / 4
    step1 = analysis.run_summary(run)["steps"][1]
    assert step1["measured_bytes"] == round(expected) and step1["window_seconds"] == 1.5
    live = bucketed.tables(run)["steps"][1]
    assert live["throughput_bps"] == pytest.approx(expected / 1.5) == step1["throughput_bps"]


def test_a_cancelled_run_s_figures_stop_at_the_cancel_and_its_cancelled_copies_count_as_not_succeeded(run):
    """Cancel at 12.5 s. Step 1's window (10 s to 15 s) stops there: 10-14 s moved 62.5 MB before
    it, 11-15 s 37.5 MB, 100 MB over 2.5 s; a copy cancelled at 14 s after running 12-14 s counts as
    started and not succeeded. Step 0 ended before the cancel and is as it was. The live reading
    (the time buckets) says the same."""
    from campaigns.models import buckets
    from campaigns.results import bucketed

    _transfer(run, 6, 1, 12, 2, 100_000_000, state="cancelled", category="cancelled")
    Run.objects.filter(pk=run.pk).update(cancel_requested_at=T0 + timedelta(seconds=12.5))
    run.refresh_from_db()
    buckets.rebuild(run.pk)
    summary = analysis.run_summary(run)
    step0, step1 = summary["steps"]
    assert step0["throughput_bps"] == pytest.approx(200e6 / 10) and "until_cancel" not in step0
    assert step1["until_cancel"] == run.cancel_requested_at.isoformat()
    assert step1["window_seconds"] == 2.5 and step1["bytes_before_cancel"] == 100_000_000
    assert step1["throughput_bps"] == pytest.approx(100e6 / 2.5)
    assert step1["bytes"] == 200_000_000 and step1["files_ok"] == 2  # what the step copied, whole
    assert (step1["files_failed"], step1["files_cancelled"]) == (1, 1)
    assert step1["success_rate"] == pytest.approx(2 / 4)
    # In flight over 10-12.5 s: 1, then 2 from 11 s, 4 from 12 s (the failure, the cancelled one).
    assert step1["achieved_mean"] == pytest.approx((2.5 + 1.5 + 0.5 + 0.5) / 2.5, abs=1e-3)
    total = summary["total"]
    assert total["success_rate"] == pytest.approx(4 / 6) and total["files_cancelled"] == 1
    assert total["window_seconds"] == 12.5 and total["throughput_bps"] == pytest.approx(300e6 / 12.5)
    live = {row["step"]: row for row in bucketed.tables(run)["steps"]}
    assert live[1]["until_cancel"] == step1["until_cancel"] and live[1]["window_seconds"] == 2.5
    assert live[1]["throughput_bps"] == pytest.approx(100e6 / 2.5)
    assert live[1]["success_rate"] == pytest.approx(2 / 4)
    assert live[1]["achieved_mean"] == pytest.approx(step1["achieved_mean"], abs=1e-3)
    assert live[0]["throughput_bps"] == pytest.approx(200e6 / 10)


def test_a_steps_concurrency_is_its_step_rows_not_the_plans_by_index(run):
    """The step row is the one source of what a step ran with: a plan that says otherwise (an
    older release's snapshot, a step skipped) is not shown as the step."""
    _transfer(run, 100, 0, 0, 5, 1000)
    _transfer(run, 101, 1, 10, 5, 1000)
    run.snapshot["parameters"]["concurrency_steps"] = [3, 6]  # the plan, read by index, would say 3 and 6
    run.save(update_fields=["snapshot"])
    steps = analysis.run_summary(run)["steps"]
    assert [(s["step"], s["concurrency"]) for s in steps] == [(0, 1), (1, 2)]

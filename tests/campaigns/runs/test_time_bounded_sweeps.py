"""How a sweep of time-bounded (or file-bounded) steps ends, through the real driver on gfal2's mock plugin.

Sites ran sweeps of 25 s steps over a pool of 200 files and saw every one end "partial" with the
stop reason "concurrency sweep completed": a sweep that did what it was asked, in the colour of a
failure. Time-bounded steps take what their time allows from the pool; the files no step reached
were not needed and are no shortfall. A copy that failed still is, and so is a planned step that
never ran.
"""

from __future__ import annotations

import pytest

from campaigns.choices import RunState, TransferState
from campaigns.models import Transfer
from campaigns.runs.outcome import NOT_NEEDED_REASON
from collectors.models import Event
from tests.support.factories import campaign, endpoint, mock_campaign
from tests.support.runs import drive

pytestmark = pytest.mark.django_db(transaction=True)


def skipped_messages(run) -> set[str]:
    return set(Transfer.objects.filter(run=run, state=TransferState.SKIPPED).values_list("error_message", flat=True))


@pytest.mark.parametrize("cap", [{}, {"max_bytes": 10**9}], ids=["free", "capped"])
def test_a_completed_time_bounded_sweep_succeeds_and_its_unneeded_files_are_no_shortfall(client, viewer, cap):
    # Copies of 1 s at concurrency 2 then 4, 2 s a step: about a dozen of the 200 files are needed.
    run = drive(
        mock_campaign("timed", file_count=200, dst_query="time=1", concurrency_steps=[2, 4], step_seconds=2, **cap)
    )
    assert run.stop_reason == "concurrency sweep completed"
    assert run.state == RunState.SUCCEEDED, (run.files_done, run.files_failed, run.files_skipped)
    assert run.files_failed == run.files_cancelled == 0 and 0 < run.files_done < 200
    assert run.files_skipped == 200 - run.files_done
    assert run.summary["not_needed"] == run.files_skipped
    assert [s["concurrency"] for s in run.summary["steps"]] == [2, 4]
    # Each file of the pool no step reached says why, not "concurrency sweep completed".
    assert skipped_messages(run) == {NOT_NEEDED_REASON}
    ended = Event.objects.get(run_id=run.pk, kind="run_end").summary
    assert f"{run.files_done} ok, 0 failed, 0 skipped, {run.files_skipped} not needed" in ended, ended

    client.force_login(viewer)
    page = client.get(run.get_absolute_url()).content.decode()
    # The run's state badge (a verdict read from off-target steps may wear the partial colour).
    assert 'class="badge badge-succeeded state-succeeded"' in page and "state-partial" not in page
    assert f"{run.files_done} ok, 0 failed, 0 skipped, " in page
    assert '<span id="files-not-needed"' in page and f"{run.files_skipped} not needed</span>" in page


def test_a_failed_copy_in_a_time_bounded_sweep_is_a_shortfall_the_unneeded_files_are_not():
    src = endpoint("timed-fail-src", "mock://src.test/data/")
    good = endpoint("timed-fail-good", "mock://good.test/data/?time=1")
    bad = endpoint("timed-fail-bad", "mock://bad.test/data/?time=1&transfer_errno=110")
    run = drive(campaign("timed-fail", [src], [good, bad], file_count=200, concurrency_steps=[2, 4], step_seconds=2))
    assert run.stop_reason == "concurrency sweep completed"
    assert run.state == RunState.PARTIAL and run.files_failed > 0 and run.files_done > 0
    # The shortfall is the failed copies alone: every file never tried was not needed.
    assert run.summary["not_needed"] == run.files_skipped == 200 - run.files_done - run.files_failed
    assert skipped_messages(run) == {NOT_NEEDED_REASON}


def test_a_time_bounded_sweep_whose_pool_ran_out_before_its_last_steps_is_partial(client, viewer):
    # Four copies of 1 s at concurrency 2 end within the first step of 4 s: steps 1 and 2 never ran.
    run = drive(
        mock_campaign("timed-short", file_count=4, dst_query="time=1", concurrency_steps=[2, 4, 8], step_seconds=4)
    )
    assert (run.files_done, run.files_failed, run.files_skipped) == (4, 0, 0)
    assert run.state == RunState.PARTIAL
    assert run.stop_reason == (
        "the planned files ran out before the sweep's last steps; 2 of 3 planned steps never ran (concurrency 4, 8)"
    )
    assert "not_needed" not in run.summary
    client.force_login(viewer)
    page = client.get(run.get_absolute_url()).content.decode()
    assert "badge-partial" in page and "2 of 3 planned steps never ran" in page


def test_a_file_bounded_step_the_pool_could_not_fill_makes_the_run_partial_and_says_so():
    """Issue 44: an FTS sweep whose steps took more files than planned left its last step short
    and still said "all planned transfers finished". A step bounded by files alone that got fewer
    than its files is a shortfall, said with its figures, whatever the engine."""
    run = drive(mock_campaign("short", file_count=10, dst_query="time=0", concurrency_steps=[1, 2, 4], step_files=4))
    assert [s["concurrency"] for s in run.summary["steps"]] == [1, 2, 4]
    assert run.files_done == 10 and run.files_failed == 0
    assert run.state == RunState.PARTIAL, run.stop_reason
    assert run.stop_reason == (
        "the planned files ran out before the sweep's last steps; the step at concurrency 4 got 2 of its 4 files"
    ), run.stop_reason
    # Files enough for every step: succeeded.
    full = drive(mock_campaign("full", file_count=12, dst_query="time=0", concurrency_steps=[1, 2, 4], step_files=4))
    assert full.state == RunState.SUCCEEDED and full.stop_reason == "concurrency sweep completed", full.stop_reason


def test_a_file_bounded_sweep_of_a_larger_file_count_succeeds_its_unused_files_not_needed():
    """The same for steps of step_files: a sweep 1, 2 of 3 files a step over a campaign of 10 took
    6; a real FTS sweep of 120 files with 24 a step read "partial (concurrency sweep completed)"."""
    run = drive(
        mock_campaign("files-surplus", file_count=10, dst_query="time=0", concurrency_steps=[1, 2], step_files=3)
    )
    assert run.stop_reason == "concurrency sweep completed"
    assert (run.files_done, run.files_failed, run.files_skipped) == (6, 0, 4)
    assert run.state == RunState.SUCCEEDED and run.summary["not_needed"] == 4
    assert skipped_messages(run) == {NOT_NEEDED_REASON}

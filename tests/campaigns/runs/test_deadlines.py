"""Every copy ends by its deadline, whatever the engine does (issue: honest runs).

The pool is driven with copiers that behave as gfal2 was seen to: one that returns only when
its context is cancelled, one that ignores the cancel altogether (root:// checksum requests,
copies to a restarted door). Then a real gfal2 copy to a door that accepts the connection and
never answers: the run records a timeout within the campaign's timeout and ten seconds.
"""

from __future__ import annotations

import threading
import time

import pytest
from django.urls import reverse

from campaigns import runs
from campaigns.choices import ErrorCategory, RunState, TransferState
from campaigns.models import Run, Transfer
from campaigns.runs.engines.copies import CopyJob, CopyResult
from campaigns.runs.executors.copy_threads import GIVE_UP, CopyThreads
from campaigns.runs.lifecycle import RunDriver
from collectors.models import Event
from tests.support.factories import campaign, endpoint, mock_campaign
from tests.support.silent_tcp import silent_tcp_server


class _Hanging:
    """A copier whose copies never end by themselves."""

    timeout_category = ErrorCategory.TRANSFER_TIMEOUT

    def __init__(self, honours_cancel: bool) -> None:
        self.honours_cancel = honours_cancel
        self.events: dict[int, threading.Event] = {}
        self.cancelled: list[int] = []
        self.release = threading.Event()

    def copy(self, job: CopyJob) -> CopyResult:
        event = self.events[threading.get_ident()] = threading.Event()
        started = time.time()
        (event if self.honours_cancel else self.release).wait(120)
        return CopyResult(job, False, started, time.time(), time.time() - started, message="Operation canceled")

    def cancel_thread(self, ident: int) -> bool:
        self.cancelled.append(ident)
        if ident in self.events:
            self.events[ident].set()
        return True


def job(index: int) -> CopyJob:
    return CopyJob(id=index, index=index, source="s", destination="d", size=1, step=0, attempt=1)


def wait_results(pool: CopyThreads, count: int, timeout: float) -> tuple[list[CopyResult], float]:
    start, got = time.monotonic(), []
    while len(got) < count and time.monotonic() - start < timeout:
        pool.enforce_deadlines()
        got += pool.collect(0.1)
    return got, time.monotonic() - start


def test_a_copy_past_its_deadline_is_cancelled_and_recorded_as_a_timeout():
    copier = _Hanging(honours_cancel=True)
    pool = CopyThreads(copier, deadline=1.0)
    pool.resize(2)
    pool.submit([job(1), job(2)])
    try:
        got, took = wait_results(pool, 2, 30)
        assert len(got) == 2 and took < 1.0 + GIVE_UP
        assert len(copier.cancelled) == 2
        for r in got:
            assert not r.ok and r.category == ErrorCategory.TRANSFER_TIMEOUT
            assert "deadline: the copy was cancelled; the engine said: Operation canceled" in r.message
            assert r.duration >= 1.0
    finally:
        pool.close()


def test_a_copy_that_ignores_the_cancel_is_given_up_and_its_slot_refilled():
    copier = _Hanging(honours_cancel=False)
    pool = CopyThreads(copier, deadline=1.0)
    pool.resize(1)
    pool.submit([job(1), job(2)])
    try:
        first, took = wait_results(pool, 1, 30)
        assert len(first) == 1 and 1.0 + GIVE_UP <= took < 1.0 + GIVE_UP + 2
        assert first[0].category == ErrorCategory.TRANSFER_TIMEOUT and "ignored the cancel" in first[0].message
        # The step keeps its concurrency: a new thread took the slot and started the next job.
        deadline = time.monotonic() + 5
        while pool.copying() != 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pool.copying() == 1 and pool.started(0) == 2
        # The copy given up finishing late is not recorded a second time.
        copier.release.set()
        second, _ = wait_results(pool, 1, 30)
        assert [r.job.id for r in second] == [2]
        assert pool.collect(0.5) == []
    finally:
        copier.release.set()
        pool.close()


@pytest.fixture
def silent_door():
    """A TCP port that accepts connections and never says a word: a door hung mid-restart."""
    with silent_tcp_server() as port:
        yield port


@pytest.mark.django_db(transaction=True)
def test_copies_to_a_door_that_never_answers_end_as_timeouts_within_the_timeout_and_ten_seconds(
    xrootd_pair, silent_door
):
    door1, _ = xrootd_pair
    door1.write_local("/data/deadline/src/1000/src-0000000", b"x" * 1000)
    src = endpoint("deadline-src", door1.root_url_for("/data/deadline/"))
    dst = endpoint("deadline-dst", f"root://127.0.0.1:{silent_door}//data/deadline/")
    obj = campaign(
        "deadline", [src], [dst], file_count=2, file_size=1000, source_file_count=1, source_path="src",
        concurrency_steps=[2], timeout=2, checksum_mode="none",
    )  # fmt: skip
    run = runs.create_run(obj, trigger="command")
    assert RunDriver(run.pk).drive() == RunState.FAILED  # nothing succeeded
    run.refresh_from_db()
    # From the first copy's start to the run's end: the deadline, and the driver's own finish.
    assert (run.finished_at - run.started_at).total_seconds() < 2 + 10 + 3
    for t in Transfer.objects.filter(run=run):
        assert t.state == TransferState.FAILED
        assert t.error_category == ErrorCategory.TRANSFER_TIMEOUT, t.error_message
        assert t.started_at is not None and t.duration is not None and t.duration < 2 + 10, t.duration


@pytest.mark.django_db(transaction=True)
def test_a_run_whose_copies_stop_finishing_is_marked_stalled_and_clears_when_they_finish(settings, client, viewer):
    settings.STORAGEOPS_STALL_SECONDS = 5
    settings.STORAGEOPS_PROGRESS_SECONDS = 1
    obj = mock_campaign("stall", dst_query="time=9", file_count=2, concurrency_steps=[2], checksum_mode="none")
    run = runs.create_run(obj, trigger="command")
    seen: list = []
    thread = threading.Thread(target=lambda: seen.append(RunDriver(run.pk).drive()), daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while Run.objects.get(pk=run.pk).stalled_since is None:
        assert time.monotonic() < deadline and thread.is_alive(), "no stall was reported"
        time.sleep(0.2)
    # While stalled, the copies in flight are on record with their start, and the live page lists them.
    begun = time.time()
    active = Transfer.objects.filter(run=run, state=TransferState.ACTIVE)
    assert active.count() == 2 and all(t.started_at is not None for t in active)
    assert all(begun - 9 - 1 <= t.started_at.timestamp() <= begun for t in active)
    client.force_login(viewer)
    page = client.get(reverse("campaigns:run_progress", args=[run.pk])).content.decode()
    assert 'id="stall-banner"' in page and "Longest in flight (2 of 2)" in page, page
    thread.join(30)
    assert seen == [RunState.SUCCEEDED]
    run.refresh_from_db()
    assert run.stalled_since is None
    said = list(
        Event.objects.filter(run_id=run.pk, kind="run_incident").order_by("time").values_list("summary", flat=True)
    )
    assert said[0].startswith("Stall: no copy finished for") and "2 in flight" in said[0]
    assert said[1].startswith("Stall over after")

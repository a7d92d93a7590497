"""A full disk or a hung door reads on the event log as one episode, not a copy error each."""

from __future__ import annotations

import dataclasses
import json
from datetime import timedelta

import pytest
from django.utils import timezone

from campaigns.choices import ErrorCategory
from campaigns.runs import storage_faults
from campaigns.runs.engines.copies import CopyJob, CopyResult
from collectors.models import Event

pytestmark = pytest.mark.django_db

SRC, DST = "root://127.0.0.1:1094", "root://127.0.0.1:1095"


def _failed(category: str, index: int = 0, ok: bool = False) -> CopyResult:
    job = CopyJob(id=index, index=index, source=f"{SRC}//data/a{index}", destination=f"{DST}//data/b{index}",
                  size=1, step=0, attempt=1)  # fmt: skip
    return CopyResult(job, ok, 0.0, 1.0, 1.0, category=category, message="boom")


@pytest.fixture(autouse=True)
def no_open_episodes():
    storage_faults._open.clear()  # this process's memory of episodes, not the database's
    yield
    storage_faults._open.clear()


def test_a_copy_that_lands_on_the_door_ends_its_full_disk_and_a_fill_soon_after_is_another_episode():
    """The soak filled a door's disk, freed it, and filled it again within a minute: one episode
    each, not the second merged into the first."""
    now = timezone.now()
    [first] = storage_faults.note_failures(1, [_failed(ErrorCategory.NO_SPACE)], now)
    # A copy to another door changes nothing; one to this door, in a batch without a failure
    # there, ends the episode.
    elsewhere = _failed("", 7, ok=True)
    elsewhere.job = dataclasses.replace(elsewhere.job, destination="root://127.0.0.1:1096//data/c")
    assert storage_faults.note_failures(1, [elsewhere], now + timedelta(seconds=5)) == []
    first.refresh_from_db()
    assert "over" not in json.loads(first.detail)
    assert storage_faults.note_failures(1, [_failed("", 1, ok=True)], now + timedelta(seconds=10)) == []
    first.refresh_from_db()
    assert json.loads(first.detail)["over"] == (now + timedelta(seconds=10)).isoformat()
    [second] = storage_faults.note_failures(2, [_failed(ErrorCategory.NO_SPACE)], now + timedelta(seconds=40))
    assert second.pk != first.pk and second.time == now + timedelta(seconds=40)
    assert storage_faults.has_open()  # the new episode, in this process


def test_a_hung_door_answering_again_ends_its_episode():
    now = timezone.now()
    [hung] = storage_faults.note_failures(1, [_failed(ErrorCategory.TRANSFER_TIMEOUT)], now)
    assert storage_faults.note_failures(1, [_failed("", ok=True)], now + timedelta(seconds=20)) == []
    [again] = storage_faults.note_failures(1, [_failed(ErrorCategory.TRANSFER_TIMEOUT)], now + timedelta(seconds=50))
    assert again.pk != hung.pk
    hung.refresh_from_db()
    assert json.loads(hung.detail)["over"] == (now + timedelta(seconds=20)).isoformat()


def test_a_full_disk_hitting_two_runs_is_one_episode_and_a_later_one_another():
    now = timezone.now()
    [event] = storage_faults.note_failures(1, [_failed(ErrorCategory.NO_SPACE, i) for i in range(3)], now)
    assert event.summary == f"No space left on {DST}" and event.time == now
    # Another run's copies a minute later, and copies that did not fail or failed otherwise: the same episode.
    also = [_failed(ErrorCategory.NO_SPACE), _failed("", ok=True), _failed(ErrorCategory.CHECKSUM_MISMATCH)]
    assert storage_faults.note_failures(2, also, now + timedelta(seconds=60)) == []
    event.refresh_from_db()
    detail = json.loads(event.detail)
    assert detail["copies"] == 4 and detail["runs"] == [1, 2]
    assert detail["end"] == (now + timedelta(seconds=60)).isoformat()
    # The disk filled again long after: a second episode.
    [again] = storage_faults.note_failures(3, [_failed(ErrorCategory.NO_SPACE)], now + timedelta(minutes=10))
    assert again.pk != event.pk
    assert Event.objects.filter(summary__startswith="No space").count() == 2


def test_a_hung_door_is_named_by_the_pair_its_copies_ran_between():
    [event] = storage_faults.note_failures(1, [_failed(ErrorCategory.TRANSFER_TIMEOUT)])
    assert event.summary == f"Copies ran into their deadline between {SRC} and {DST} (a door not answering)"
    assert storage_faults.note_failures(1, [_failed(ErrorCategory.CHECKSUM_TIMEOUT)]) == []

"""A worker whose clock is an hour behind keeps its run, and the run says the clock is off.

A real Celery worker runs under libfaketime (Debian's), its clock an hour behind this host's
and the database's (its monotonic clock left alone, as a stepped wall clock leaves it). While
it drives a run, the lease it holds is never stale to anyone else (leases are judged by the
database's clock), the run ends with one driver, and an incident on the run says how far off
the driver's clock is; what it says is true: the copies' recorded times are an hour early.
"""

from __future__ import annotations

import re
import time
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from campaigns import runs
from campaigns.choices import RunState
from campaigns.models import Run, Transfer
from collectors.choices import EventKind
from collectors.models import Event
from tests.support.factories import mock_campaign
from tests.support.workers import celery_worker

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
FAKETIME = next(iter(sorted(Path("/usr/lib").glob("*/faketime/libfaketime.so.1"))), Path("libfaketime.so.1"))
HOUR = 3600


def test_a_worker_an_hour_behind_keeps_its_run_and_says_its_clock_is_off(log_dir):
    assert FAKETIME.exists(), "libfaketime (Debian's package) is installed by scripts/bootstrap.sh test"
    campaign = mock_campaign("skewed", dst_query="time=1", file_count=24, file_size=1000, concurrency_steps=[2])
    worker = celery_worker(log_dir, name=f"behind-{uuid.uuid4().hex[:6]}", LD_PRELOAD=str(FAKETIME),
                           FAKETIME="-1h", FAKETIME_DONT_FAKE_MONOTONIC="1")  # fmt: skip
    try:
        worker.wait_for_log("ready.", timeout=60)
        run = runs.start_run(campaign, trigger="command")
        deadline = time.monotonic() + 120
        seen_driving = False
        while Run.objects.get(pk=run.pk).is_live:
            assert time.monotonic() < deadline, "the run did not end"
            seen_driving = seen_driving or bool(Run.objects.get(pk=run.pk).executor)
            # Never free for another driver while its own beats, whatever its clock says.
            assert run.pk not in runs.stale_run_ids()
            time.sleep(0.5)
    finally:
        worker.stop()
    run.refresh_from_db()
    assert seen_driving and run.state == RunState.SUCCEEDED and run.files_done == 24, run.error
    incidents = list(Event.objects.filter(run_id=run.pk, kind=EventKind.RUN_INCIDENT).values_list("summary", flat=True))
    assert not [s for s in incidents if " resumed by driver " in s or "lost its lease" in s], incidents
    [said] = [s for s in incidents if "this host's clock is" in s]
    found = re.search(r"this host's clock is (\d+) s behind the database's; the copy times it records", said)
    assert found and abs(int(found.group(1)) - HOUR) <= 5, said
    # True of the world: the copies' times, written by that worker, are an hour early.
    last = Transfer.objects.filter(run=run).latest("finished_at").finished_at
    assert abs((timezone.now() - last) - timedelta(seconds=HOUR)) < timedelta(seconds=120), last

"""Door faults on a real run (issue: honest runs), with real XRootD doors and a real worker.

One destination door is killed in the middle of the run and comes back only after longer than
the campaign's timeout; the other destination is a closed port for the whole run (its door is
started afterwards). Every copy still ends by its timeout and ten seconds as a timeout or an
error, the quiet spell is on the record as a stall, and the run is partial. Then "retry
failed", through the worker, until the campaign's files are all there: checked on the doors'
disks, not only in the database.
"""

from __future__ import annotations

import time
import zlib
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.utils import timezone

from campaigns import runs
from campaigns.choices import RunState, TransferState
from campaigns.models import Run, Transfer
from campaigns.results.readers import retry_chain
from campaigns.runs.executors.copy_threads import GIVE_UP
from campaigns.runs.executors.deadline import DEADLINE_GRACE
from collectors.choices import EventKind
from collectors.models import Event
from devsite.xrootd_server import XRootDServer
from tests.campaigns.runs.test_crash_safety import progress, wait_for
from tests.support.factories import campaign, endpoint
from tests.support.workers import celery_worker

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

TIMEOUT = 6  # s; gfal2's own, StorageOps' deadline is 3 s later; a good copy here takes ~2.5 s
STALL = 5  # s without a finished copy (the setting's minimum): hung copies outlast it
FILES = 12
SIZE = 200_000


def adler32(path: Path) -> str:
    return f"{zlib.adler32(path.read_bytes()):08x}"


def local(door: XRootDServer, url: str) -> Path:
    return door.local_path("/" + urlsplit(url).path.lstrip("/"))


def test_door_killed_mid_run_and_a_closed_port_then_retry_failed_until_complete(tmp_path, log_dir):
    doors = {
        name: XRootDServer(name, tmp_path / name, workdir=tmp_path / f"{name}-run")
        for name in ("fsrc", "fdst", "fclosed")
    }
    source, killed, closed = doors.values()
    source.start()
    killed.start()
    # `closed` has its port but no daemon yet: copies to it meet a closed port until it starts.
    worker = celery_worker(log_dir, name="faults", STORAGEOPS_STALL_SECONDS=str(STALL), STORAGEOPS_PROGRESS_SECONDS="1")
    try:
        src = endpoint("fsrc", source.root_url_for("/data/f/"))
        dst = endpoint("fdst", killed.root_url_for("/data/f/"))
        bad = endpoint("fclosed", closed.root_url_for("/data/f/"))
        obj = campaign(
            "door-faults", [src], [dst, bad], file_count=FILES, file_size=SIZE, create_sources=True,
            source_file_count=3, checksum_mode="both", checksum_algorithm="adler32", concurrency_steps=[6],
            timeout=TIMEOUT, retries=0,
        )  # fmt: skip
        worker.wait_for_log("ready.", timeout=60)
        run = runs.start_run(obj, trigger="command")
        began = time.monotonic()
        # Half the files go to the killed door: it dies once its first copies are done, with
        # others in flight, and stays down for longer than the campaign's timeout.
        wait_for(lambda: progress(run.pk) >= 1, 60 + 4 * TIMEOUT, "the first finished copy")
        first_copy = time.monotonic() - began
        killed.stop(timeout=0)
        down_at = timezone.now()
        # Down for longer than a copy may wait for it (its deadline, and the wait for a cancel
        # the copy ignores): copies started meanwhile are lost, not merely late.
        time.sleep(TIMEOUT + DEADLINE_GRACE + GIVE_UP + 1)
        killed.start()
        up_at = timezone.now()
        outage = (up_at - down_at).total_seconds()
        # Each copy ends by its deadline or is given up; the worst case is every copy in turn.
        wait_for(lambda: not Run.objects.get(pk=run.pk).is_live, FILES * (TIMEOUT + 10), "the run to end")
        first_run = time.monotonic() - began
        run.refresh_from_db()

        rows = list(Transfer.objects.filter(run=run).order_by("index"))
        print(f"\nfirst copy after {first_copy:.1f} s; door down {outage:.1f} s; run over after {first_run:.1f} s")
        assert run.state == RunState.PARTIAL, (run.state, run.stop_reason, run.error)
        assert len(rows) == FILES and all(t.state in (TransferState.SUCCEEDED, TransferState.FAILED) for t in rows)
        longest = 0.0
        for t in rows:
            assert t.started_at is not None and t.finished_at is not None, t
            took = (t.finished_at - t.started_at).total_seconds()
            longest = max(longest, took)
            assert took <= TIMEOUT + 10, (t.index, took, t.error_message)
            if t.state == TransferState.FAILED:
                assert t.error_category, (t.index, t.error_message)
        failed = [t for t in rows if t.state == TransferState.FAILED]
        print(f"longest copy {longest:.1f} s ({longest - TIMEOUT:+.1f} s past the {TIMEOUT} s timeout)")
        print("failures:", sorted({(t.error_category, t.destination_endpoint_id == bad.pk) for t in failed}))
        # Every copy to the closed port failed, and none to the killed door succeeded while it was down.
        assert {t.index for t in failed if t.destination_endpoint_id == bad.pk} == set(range(1, FILES, 2))
        for t in rows:
            if t.destination_endpoint_id == dst.pk and t.state == TransferState.SUCCEEDED:
                assert not down_at < t.finished_at < up_at, (t.index, t.finished_at, down_at, up_at)
        lost = sum(t.destination_endpoint_id == dst.pk for t in failed)
        print(f"the killed door lost {lost} of its {FILES // 2} copies")
        assert lost > 0
        incidents = Event.objects.filter(run_id=run.pk, kind=EventKind.RUN_INCIDENT).values_list("summary", flat=True)
        assert any(s.startswith("Stall: no copy finished for") for s in incidents), list(incidents)

        # The closed port's door starts; "retry failed" re-drives what did not succeed, through
        # the worker, run after run, until the first run's plan is done.
        closed.start()
        last, retried = run, 0
        while not (retry_chain(last) or {}).get("complete"):
            assert retried < 3, list(Transfer.objects.filter(run=last).values_list("index", "error_message"))
            last = runs.retry_failed(last, trigger="command")
            retried += 1
            wait_for(lambda pk=last.pk: not Run.objects.get(pk=pk).is_live, FILES * (TIMEOUT + 10), "the retry to end")
            last.refresh_from_db()
        chain = retry_chain(last)
        print(f"{retried} retries; chain {[(r['id'], r['state'], r['files_done']) for r in chain['runs']]}")
        assert chain["percent"] == 100.0
    finally:
        worker.stop()
        for door in doors.values():
            door.stop()

    # On the doors' disks: each planned file once, in the folder of the run that copied it,
    # with the bytes of its source now on the source door.
    done = Transfer.objects.filter(run__in=[r["id"] for r in chain["runs"]], state=TransferState.SUCCEEDED)
    assert sorted(done.values_list("index", flat=True)) == list(range(FILES))
    for t in done:
        door = killed if t.destination_endpoint_id == dst.pk else closed
        there, origin = local(door, t.destination), local(source, t.source)
        assert there.stat().st_size == SIZE
        assert adler32(there) == t.source_checksum == adler32(origin), (t.run_id, t.index)

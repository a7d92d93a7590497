"""The xrootd engine on real XRootD doors: what it writes is what the records say, a cancel
stops a copy under way, a deadline too, and a door's refusal lands in the right category.

Bytes and adler32 at the destination are read from the door's disk and hashed with zlib,
independently of XrdCl. The lifecycle around the engine is the contract's
(test_engine_contract.py, its "xrootd" case).
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest

from campaigns import runs
from campaigns.choices import ErrorCategory, RunState, TransferState
from campaigns.models import RunStep, Transfer
from campaigns.runs.engines.copies import CopyJob, CopyOptions
from campaigns.runs.engines.xrootd.client import XRootDCopier, _checksum_value
from campaigns.runs.engines.xrootd.modes import STREAMED_MODE, TPC_MODE, mode_error
from campaigns.runs.engines.xrootd.options import XRootDOptions
from campaigns.runs.executors.copy_threads import CopyThreads
from campaigns.runs.lifecycle import RunDriver
from tests.campaigns.runs.test_real_transfers import adler32, url_path
from tests.support.factories import campaign, endpoint

SIZE = 2_000_000


def job(source: str, destination: str, size: int, checksum: str = "") -> CopyJob:
    return CopyJob(
        id=1, index=0, source=source, destination=destination, size=size, step=0, attempt=1, checksum=checksum
    )


def copy_in_thread(copier: XRootDCopier, made: CopyJob) -> tuple[threading.Thread, list]:
    got: list = []
    thread = threading.Thread(target=lambda: got.append(copier.copy(made)), daemon=True)
    thread.start()
    return thread, got


@pytest.mark.django_db(transaction=True)
def test_a_sweep_of_modes_and_concurrency_writes_what_its_records_say(xrootd_pair):
    door1, door2 = xrootd_pair
    src = endpoint("xrd-sweep-src", door1.root_url_for("/data/xrd-sweep/src/"))
    dst = endpoint("xrd-sweep-dst", door2.root_url_for("/data/xrd-sweep/dst/"))
    made = campaign(
        "xrd-sweep", [src], [dst], engine="xrootd", file_count=16, file_size=SIZE, create_sources=True,
        checksum_mode="both", checksum_algorithm="adler32", concurrency_steps=[2, 4], step_files=4,
        sweep={"tpc_mode": ["pull", "streamed"]},
    )  # fmt: skip
    run = runs.create_run(made, trigger="command")
    assert RunDriver(run.pk).drive() == RunState.SUCCEEDED, run.error
    run.refresh_from_db()
    assert (run.files_done, run.files_failed) == (16, 0)
    modes = {"pull": TPC_MODE, "streamed": STREAMED_MODE}
    asked = {s.index: modes[s.point["tpc_mode"]] for s in RunStep.objects.filter(run=run)}
    assert sorted(Counter(asked.values()).items()) == [(TPC_MODE, 2), (STREAMED_MODE, 2)]
    for t in Transfer.objects.filter(run=run):
        on_disk = door2.local_path(url_path(t.destination))
        assert t.state == TransferState.SUCCEEDED and t.copy_mode == asked[t.step], (t.step, t.copy_mode)
        assert on_disk.stat().st_size == t.size == SIZE
        # Read by XrdCl from each door, and here from the destination's disk: all three agree.
        assert t.source_checksum == t.destination_checksum == f"{adler32(on_disk):08x}"


@pytest.mark.parametrize(("mode", "size"), [("pull", 1 << 30), ("streamed", 4 << 20)])
def test_a_cancel_stops_a_copy_under_way(xrootd_pair, mode, size):
    door1, door2 = xrootd_pair
    # Sparse: the source door reads zeros without the disk.
    os.truncate(door1.write_local(f"/data/xrd-cancel/{mode}", b""), size)
    copier = XRootDCopier(CopyOptions(tpc_mode=mode), XRootDOptions(chunk_size=256 << 10, xrate=1 << 20))
    copy = door2.local_path(f"/data/xrd-cancel/{mode}-copy")
    made = job(
        door1.root_url_for(f"/data/xrd-cancel/{mode}"), door2.root_url_for(f"/data/xrd-cancel/{mode}-copy"), size
    )
    try:
        thread, got = copy_in_thread(copier, made)
        time.sleep(0.3)
        assert copier.cancel_all() == 1
        thread.join(10)
    finally:
        copy.unlink(missing_ok=True)
    [result] = got
    assert not result.ok and result.category == ErrorCategory.CANCELLED, result
    # Whole, the streamed copy takes 4 s and the pull about 10 s here (XrdCl: a second's look,
    # then the door stops its pull and answers).
    assert result.code == errno.ECANCELED and result.duration < {"pull": 5.0, "streamed": 1.5}[mode], result
    assert result.copy_mode == {"pull": TPC_MODE, "streamed": STREAMED_MODE}[mode]


def test_a_copy_past_its_deadline_is_cancelled_and_recorded_as_a_timeout(xrootd_pair):
    door1, door2 = xrootd_pair
    door1.write_local("/data/xrd-deadline/f", os.urandom(4 << 20))
    copier = XRootDCopier(CopyOptions(tpc_mode="streamed"), XRootDOptions(chunk_size=256 << 10, xrate=1 << 20))
    pool = CopyThreads(copier, deadline=1.0)
    pool.resize(1)
    try:
        pool.submit(
            [job(door1.root_url_for("/data/xrd-deadline/f"), door2.root_url_for("/data/xrd-deadline/g"), 4 << 20)]
        )
        started = time.monotonic()
        got = []
        while not got and time.monotonic() - started < 10:
            pool.enforce_deadlines()
            got = pool.collect(0.1)
    finally:
        pool.close()
    [result] = got
    assert result.category == ErrorCategory.TRANSFER_TIMEOUT and "was cancelled" in result.message, result
    assert time.monotonic() - started < 3


@pytest.mark.parametrize("mode", ["auto", "streamed"])
def test_a_missing_source_is_not_found(xrootd_pair, mode):
    door1, door2 = xrootd_pair
    copier = XRootDCopier(CopyOptions(tpc_mode=mode))
    result = copier.copy(
        job(door1.root_url_for("/data/xrd-none/gone"), door2.root_url_for(f"/data/xrd-none/{mode}"), 10)
    )
    assert not result.ok and result.category == ErrorCategory.NOT_FOUND, result
    assert result.code == errno.ENOENT and "[3011]" in result.message
    assert not door2.local_path(f"/data/xrd-none/{mode}").exists()


def test_a_campaign_asks_only_for_what_xrootds_client_can_do():
    door, local, web = "root://127.0.0.1:1094//data/", "file:///srv/files/", "davs://127.0.0.1:8443/data/"
    assert mode_error(["auto", "pull", "streamed"], [(door, door)]) is None
    assert "in push mode" in mode_error(["push"], [(door, door)])
    assert "in pull mode" in mode_error(["pull"], [(door, local)])
    assert "choose the gfal2 engine" in mode_error(["auto"], [(door, web)])


def test_checksums_are_recorded_in_storageops_notation_leading_zeros_kept():
    # XrdCl prints "adler32:88ce912" for 088ce912: a record must equal the data's checksum.
    assert _checksum_value("adler32:88ce912") == "088ce912"
    assert _checksum_value("md5:0f" + "1" * 30) == "0f" + "1" * 30
    assert _checksum_value(None) == ""


def test_a_web_process_never_imports_xrootds_client():
    """Importing XRootD.client registers an exit handler that calls isinstance() on every object
    of the process: in gunicorn's workers it evaluated django-csp's lazy nonce and raised at each
    exit. A process that only serves pages (every app ready, the URLconf loaded) must not have it."""
    script = (
        "import sys, django; django.setup(); import storageops.urls; "
        "from django.urls import resolve; resolve('/'); "
        "print(sorted(m for m in sys.modules if m.startswith(('XRootD', 'pyxrootd'))))"
    )
    shown = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert shown.stdout.strip() == "[]", shown.stdout + shown.stderr

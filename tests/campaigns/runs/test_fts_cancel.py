"""A run cancelled while FTS copies: counts that mean what they say, durations of copies that ran,
and a file FTS reports cancelled that is whole on its destination (FTS's own race).

The FTS double copies for real with gfal2 into a door throttled to 2 MB/s, so two 4 MB copies run
for seconds; its cancel reaches one of them too late (`late_cancels=1`), as FTS's does when a copy
ends as the signal comes. Checked against the world: FTS's own record of each file (the double's),
and the destination files on disk, read and hashed here.
"""

from __future__ import annotations

import time
import zlib

import pytest

from campaigns import runs
from campaigns.choices import RunState
from campaigns.models import Run, Transfer
from campaigns.runs.engines.base import CopyOptions
from campaigns.runs.engines.fts import landed
from campaigns.runs.engines.gfal2.client import Gfal2Copier
from devsite.xrootd_server import XRootDServer, throttle_config
from tests.campaigns.runs.test_fts_engine import TOKEN, instance, run_in_thread, url_path, write_sources
from tests.support.factories import campaign, endpoint
from tests.support.fts_double import FtsDouble

pytestmark = pytest.mark.django_db(transaction=True)
SIZE, COUNT, RATE = 4_000_000, 8, 2_000_000


@pytest.fixture
def doors(tmp_path):
    source = XRootDServer("cancel-src", tmp_path / "s", workdir=tmp_path / "sr")
    destination = XRootDServer(
        "cancel-dst", tmp_path / "d", workdir=tmp_path / "dr", extra_config=throttle_config(RATE)
    )
    try:
        yield source.start(), destination.start()
    finally:
        source.stop()
        destination.stop()


def test_a_run_cancelled_while_fts_copies_two_files(doors):
    source, destination = doors
    fts = FtsDouble(optimizer_interval=1.0, token=TOKEN, late_cancels=1).start()
    try:
        src = endpoint("cx-src", source.root_url_for("/data/cx/"))
        dst = endpoint("cx-dst", destination.root_url_for("/data/cx/"))
        options = {"instance": instance(fts, files_per_job=2, manage_link_limits=False).pk}
        obj = campaign(
            "fts-cancel-2", [src], [dst], engine="fts", engine_options=options, file_count=COUNT, file_size=SIZE,
            checksum_mode="both", concurrency_steps=[2], cancel_grace=0, timeout=120,
        )  # fmt: skip
        write_sources(source, "/data/cx/", obj.source_path, COUNT, SIZE)
        run = runs.create_run(obj, trigger="command")
        thread, result = run_in_thread(run.pk)
        deadline = time.monotonic() + 60
        while sum(f["file_state"] == "ACTIVE" for f in fts.files.values()) < 2:
            assert time.monotonic() < deadline, ("two copies never ran", result, list(fts.files.values()))
            time.sleep(0.05)
        time.sleep(1.5)  # both well under way: 4 MB at 1 MB/s each
        assert runs.request_cancel(run)
        thread.join(90)
        assert not thread.is_alive() and result.get("state") == RunState.CANCELLED, result
        files = dict(fts.files)
    finally:
        fts.stop()

    run = Run.objects.get(pk=run.pk)
    rows = list(Transfer.objects.filter(run=run).order_by("index"))
    report = "\n".join(
        f"{t.index} {t.state} {t.started_at} {t.finished_at} {t.duration} {t.complete_on_destination} {t.error_message}"
        for t in rows
    )
    # Counts: the two copies FTS had started are cancelled; the six never started are skipped.
    assert (run.files_done, run.files_failed, run.files_cancelled, run.files_skipped) == (0, 0, 2, 6), report
    cancelled = [t for t in rows if t.state == "cancelled"]
    skipped = [t for t in rows if t.state == "skipped"]
    assert len(cancelled) == 2 and len(skipped) == 6, report
    for t in skipped:
        assert t.started_at is None and t.duration is None and t.complete_on_destination is None, report
    for t in cancelled:
        f = files[t.fts_file_id]
        assert f["file_state"] == "CANCELED" and f["tx_duration"] == 0.0  # what FTS says of it
        # Its own times: FTS's start and finish (to the second), and the time between them as
        # the duration, never FTS's 0.0 for a copy that ran for seconds.
        assert t.started_at is not None and t.finished_at is not None, report
        assert t.duration == (t.finished_at - t.started_at).total_seconds() >= 1.0, report
    # The destination's disk, read here: each cancelled copy's record says what is there. The one
    # the cancel reached too late is whole; gfal2's cancel does not stop a root:// TPC the door
    # runs itself either, so the other may be whole too (it was, each time this ran).
    for t in cancelled:
        on_disk = destination.local_path(url_path(t.destination))
        original = source.local_path(url_path(t.source)).read_bytes()
        complete = on_disk.exists() and zlib.adler32(on_disk.read_bytes()) == zlib.adler32(original)
        assert complete is t.complete_on_destination, report
        if complete:
            assert "complete on destination" in t.error_message and t.error_category == "cancelled"
    assert any(t.complete_on_destination for t in cancelled), report


def test_a_file_cut_short_or_missing_on_the_destination_is_not_whole(doors):
    source, destination = doors
    data = bytes(range(256)) * 4000
    source.write_local("/data/w/a", data)
    destination.write_local("/data/w/a", data)
    destination.write_local("/data/w/cut", data[: len(data) // 2])
    destination.write_local("/data/w/other", data[::-1])
    storage = Gfal2Copier(CopyOptions())
    src = source.root_url_for("/data/w/a")
    known = f"{zlib.adler32(data):08x}"
    checks = [
        (1, destination.root_url_for("/data/w/a"), len(data), known, src),
        (2, destination.root_url_for("/data/w/a"), len(data), "", src),  # no known checksum: the source's
        (3, destination.root_url_for("/data/w/cut"), len(data), known, src),
        (4, destination.root_url_for("/data/w/other"), len(data), "", src),  # same size, other bytes
        (5, destination.root_url_for("/data/w/none"), len(data), known, src),
    ]
    assert landed.complete_on_destination(storage, checks, "ADLER32") == {
        1: True,
        2: True,
        3: False,
        4: False,
        5: False,
    }

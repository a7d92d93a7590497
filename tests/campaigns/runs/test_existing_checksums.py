"""Existing data's checksums, on two real XRootD doors: read from the source door (gfal2's checksum)
when the run lists its files, given to the copy to compare the destination's with after it, and
recorded on each transfer. Held to the doors' disks, hashed here: every copy's source checksum is
its source's bytes', its destination checksum its copy's; and a file rewritten (same size, other
bytes) after the listing fails as a checksum mismatch instead of being recorded with a checksum its
copy does not have. Through gfal2 (checksum target and both); XRootD's own check says "[ERROR] CheckSum error".
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from campaigns.choices import ErrorCategory, RunState
from campaigns.models import Run, Transfer
from campaigns.runs import existing_sources
from campaigns.runs.lifecycle import RunDriver
from campaigns.runs.starting import create_run
from tests.campaigns.runs.test_existing_sources import adler32, existing, put_dataset

pytestmark = pytest.mark.django_db(transaction=True)
CHANGED = "file-05.dat"  # 100,003 bytes: rewritten with other bytes after the listing


def rewritten_after_listing(monkeypatch, root: Path) -> None:
    """The listing as the run makes it, then one of its files rewritten on the door's disk: a
    site's file replaced between the listing and its copy."""
    real = existing_sources.list_existing

    def listing_then_rewrite(*args, **kwargs):
        found = real(*args, **kwargs)
        path = root / CHANGED
        path.write_bytes(random.Random("other").randbytes(path.stat().st_size))
        return found

    monkeypatch.setattr(existing_sources, "list_existing", listing_then_rewrite)


def check(run: Run, root: Path, door2) -> None:
    run.refresh_from_db()
    listed = {Path(e["url"]).name: e["checksum"] for e in run.snapshot["listing"]}
    rows = {Path(t.source).name: t for t in Transfer.objects.filter(run=run)}
    report = {
        name: (t.state, t.source_checksum, t.destination_checksum, t.error_message[:120]) for name, t in rows.items()
    }
    assert run.state == RunState.PARTIAL and (run.files_done, run.files_failed) == (19, 1), (run.stop_reason, report)
    for name, t in rows.items():
        # The checksum the source door gave when the run listed it, on the transfer.
        assert t.source_checksum == listed[name] and len(t.source_checksum) == 8, report[name]
        if name == CHANGED:
            assert t.state == "failed" and t.error_category == ErrorCategory.CHECKSUM_MISMATCH, report[name]
            assert t.destination_checksum == "", report[name]
            continue
        copy = door2.data_dir / t.destination.split("//", 2)[2].lstrip("/")
        # The source's bytes, its copy's bytes and both records agree.
        assert t.state == "succeeded" and t.source_checksum == adler32(root / name), report[name]
        assert t.destination_checksum == adler32(copy) == t.source_checksum, report[name]


@pytest.mark.parametrize("mode", ["target", "both"])
def test_gfal2_copies_of_existing_data_are_checked_against_the_sources_checksum(xrootd_pair, monkeypatch, mode):
    door1, door2 = xrootd_pair
    root = put_dataset(door1, f"sums-{mode}")
    rewritten_after_listing(monkeypatch, root)
    run = create_run(existing(door1, door2, f"sums-{mode}", checksum_mode=mode, cleanup="keep"), trigger="command")
    RunDriver(run.pk).drive()
    check(run, root, door2)

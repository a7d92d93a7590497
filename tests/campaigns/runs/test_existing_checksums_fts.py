"""Existing data copied through FTS (the double, which copies for real with gfal2 between two real
XRootD doors): the source door's checksum from the run's listing goes to FTS with each file
(FTS compares the destination's with it, as a user-given checksum), and is recorded on the
transfer with the destination's. A file rewritten after the listing fails in FTS with a
checksum mismatch. Held to the doors' disks, as the gfal2 case is (test_existing_checksums)."""

from __future__ import annotations

import pytest

from campaigns.runs.engines.fts.models import FtsInstance
from campaigns.runs.lifecycle import RunDriver
from campaigns.runs.starting import create_run
from tests.campaigns.runs.test_existing_checksums import check, rewritten_after_listing
from tests.campaigns.runs.test_existing_sources import existing, put_dataset
from tests.support.fts_double import FtsDouble

pytestmark = pytest.mark.django_db(transaction=True)
TOKEN = "fts-existing-token"


def test_fts_copies_of_existing_data_are_checked_against_the_sources_checksum(xrootd_pair, monkeypatch):
    door1, door2 = xrootd_pair
    root = put_dataset(door1, "sums-fts")
    rewritten_after_listing(monkeypatch, root)
    double = FtsDouble(optimizer_interval=1.0, token=TOKEN).start()
    try:
        instance = FtsInstance.objects.create(
            name="fts-existing", url=double.url, bearer_token=TOKEN, files_per_job=20, poll_seconds=0.3
        )
        obj = existing(door1, door2, "sums-fts", checksum_mode="both", cleanup="keep", engine="fts",
                       engine_options={"instance": instance.pk})  # fmt: skip
        run = create_run(obj, trigger="command")
        RunDriver(run.pk).drive()
    finally:
        double.stop()
    check(run, root, door2)

"""Real copies between real XRootD servers: root:// and davs:// TPC, uploads, downloads.

Bytes and adler32 at the destination are checked independently of gfal2: the servers'
files are read straight from disk and hashed with zlib.
"""

from __future__ import annotations

import zlib
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from campaigns import runs
from campaigns.choices import RunState
from campaigns.models import Run, Transfer
from campaigns.runs.lifecycle import RunDriver
from tests.support.factories import campaign, endpoint

pytestmark = pytest.mark.django_db(transaction=True)


def adler32(path: Path) -> int:
    value = 1
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            value = zlib.adler32(chunk, value)
    return value


def drive(obj) -> Run:
    run = runs.create_run(obj, trigger="command")
    RunDriver(run.pk).drive()
    run.refresh_from_db()
    return run


def url_path(url: str) -> str:
    return "/" + urlsplit(url).path.lstrip("/")


def check_destinations(run: Run, src_server, dst_server) -> None:
    """Every succeeded transfer's file exists at the destination with the source's bytes."""
    for t in Transfer.objects.filter(run=run, state="succeeded"):
        src = src_server.local_path(url_path(t.source))
        dst = dst_server.local_path(url_path(t.destination))
        assert dst.stat().st_size == src.stat().st_size == t.size
        assert adler32(dst) == adler32(src)


def test_root_tpc_campaign_copies_real_files_with_adler32(xrootd_pair):
    door1, door2 = xrootd_pair
    src = endpoint("door1-root", door1.root_url_for("/data/t1/"))
    dst = endpoint("door2-root", door2.root_url_for("/data/t1/"))
    obj = campaign(
        "root-tpc", [src], [dst], file_count=24, file_size=1_000_000, create_sources=True,
        checksum_mode="both", checksum_algorithm="adler32", concurrency_steps=[4],
    )  # fmt: skip
    run = drive(obj)
    assert run.state == RunState.SUCCEEDED, run.error
    assert (run.files_done, run.files_failed) == (24, 0)
    check_destinations(run, door1, door2)
    assert set(Transfer.objects.filter(run=run).values_list("copy_mode", flat=True)) == {"3rd pull"}
    assert run.versions["gfal2"].startswith("2.")
    assert run.versions["endpoints"]["door1-root"].startswith("v5")


@pytest.mark.parametrize(("mode", "reported"), [("pull", "3rd pull"), ("push", "3rd push"), ("streamed", "streamed")])
def test_davs_tpc_in_each_mode_with_fallback_disabled(xrootd_https_pair, test_ca, mode, reported):
    a, b = xrootd_https_pair
    # XrdHttpTPC refuses gridsite delegation; a bearer credential makes gfal2 send
    # "Credential: none" (docs/notes-xrootd-gfal2.md). These servers ignore the token.
    creds = {"bearer_token": "storageops-test", "ca_dir": str(test_ca.ca_dir)}
    src = endpoint(f"a-davs-{mode}", a.davs_url_for(f"/data/{mode}/"), **creds)
    dst = endpoint(f"b-davs-{mode}", b.davs_url_for(f"/data/{mode}/"), **creds)
    # Pull is how FTS and sites drive davs TPC: a full-size campaign; the other modes need fewer.
    count = 20 if mode == "pull" else 6
    obj = campaign(
        f"davs-{mode}", [src], [dst], file_count=count, file_size=2_000_000, create_sources=True,
        checksum_mode="both", tpc_mode=mode, concurrency_steps=[3],
    )  # fmt: skip
    run = drive(obj)
    assert run.state == RunState.SUCCEEDED, list(Transfer.objects.filter(run=run).values_list("error_message"))
    assert run.files_done == count
    # The mode gfal2 reports having used: with fallback off, nothing else could have run.
    assert set(Transfer.objects.filter(run=run).values_list("copy_mode", flat=True)) == {reported}
    check_destinations(run, a, b)


def test_upload_and_download_through_file_urls(xrootd_pair, tmp_path):
    door1, _ = xrootd_pair
    local_dir = tmp_path / "local"
    local_dir.mkdir()
    local = endpoint("worker-disk", f"file://{local_dir}/", backend_name="worker-local")
    remote = endpoint("door1-upload", door1.root_url_for("/data/updown/"))
    up = campaign(
        "upload", [local], [remote], file_count=5, file_size=500_000, create_sources=True,
        checksum_mode="both", concurrency_steps=[2],
    )  # fmt: skip
    run = drive(up)
    assert run.files_done == 5, list(Transfer.objects.filter(run=run).values_list("error_message"))
    for t in Transfer.objects.filter(run=run):
        path = door1.local_path(url_path(t.destination))
        source = Path(t.source.removeprefix("file://"))
        assert adler32(path) == adler32(source)
    down = campaign("download", [remote], [local], file_count=3, file_size=500_000, create_sources=True,
                    concurrency_steps=[2])  # fmt: skip
    run = drive(down)
    assert run.files_done == 3
    assert all(Path(t.destination.removeprefix("file://")).stat().st_size == 500_000
               for t in Transfer.objects.filter(run=run))  # fmt: skip


def test_missing_source_over_davs_is_not_found(xrootd_https_pair, test_ca):
    a, b = xrootd_https_pair
    creds = {"bearer_token": "storageops-test", "ca_dir": str(test_ca.ca_dir)}
    src = endpoint("a-empty", a.davs_url_for("/data/nothing-here/"), **creds)
    dst = endpoint("b-t3", b.davs_url_for("/data/t3/"), **creds)
    run = drive(campaign("missing", [src], [dst], file_count=2, checksum_mode="both", tpc_mode="pull"))
    assert run.files_failed == 2
    transfer = Transfer.objects.filter(run=run).first()
    assert transfer.error_category == "not_found", transfer.error_message
    assert transfer.error_message


def test_missing_source_over_root_tpc_keeps_xrootds_own_words(xrootd_pair):
    """XrdCl reports a TPC whose source is missing as a delegation failure; the record
    says what the server said (category tpc_failure) rather than guessing."""
    door1, door2 = xrootd_pair
    src = endpoint("door1-empty", door1.root_url_for("/data/nothing-here/"))
    dst = endpoint("door2-t3", door2.root_url_for("/data/t3/"))
    run = drive(campaign("missing-root", [src], [dst], file_count=1, checksum_mode="both"))
    transfer = Transfer.objects.get(run=run)
    assert transfer.state == "failed"
    assert transfer.error_category == "tpc_failure"
    assert "delegation" in transfer.error_message


def test_unwritable_destination_is_permission_denied(xrootd_pair):
    door1, door2 = xrootd_pair
    locked = door2.local_path("/data/locked")
    locked.mkdir(parents=True, exist_ok=True)
    locked.chmod(0o555)
    src = endpoint("door1-t4", door1.root_url_for("/data/t4/"))
    dst = endpoint("door2-locked", door2.root_url_for("/data/locked/"))
    run = drive(campaign("locked", [src], [dst], file_count=2, create_sources=True, destination_path="x"))
    assert run.files_failed == 2
    categories = set(Transfer.objects.filter(run=run).values_list("error_category", flat=True))
    assert categories == {"permission_denied"}, list(Transfer.objects.filter(run=run).values_list("error_message"))


def test_sweep_on_real_files_gives_one_aggregate_per_step(xrootd_pair):
    door1, door2 = xrootd_pair
    src = endpoint("door1-sweep", door1.root_url_for("/data/sweep/"))
    dst = endpoint("door2-sweep", door2.root_url_for("/data/sweep/"))
    obj = campaign(
        "real-sweep", [src], [dst], file_count=24, file_size=2_000_000, create_sources=True, source_file_count=4,
        checksum_mode="both", concurrency_steps=[1, 2, 4], step_files=8,
    )  # fmt: skip
    run = drive(obj)
    steps = run.summary["steps"]
    assert [(s["concurrency"], s["files_ok"]) for s in steps] == [(1, 8), (2, 8), (4, 8)]
    assert all(s["throughput_bps"] > 0 for s in steps)
    assert run.summary["doors"]
    check_destinations(run, door1, door2)


@pytest.mark.parametrize("mode", ["source", "target"])
def test_one_sided_checksum_checks_against_the_generated_data(xrootd_pair, mode):
    door1, door2 = xrootd_pair
    src = endpoint(f"door1-{mode}", door1.root_url_for(f"/data/{mode}/"))
    dst = endpoint(f"door2-{mode}", door2.root_url_for(f"/data/{mode}/"))
    obj = campaign(f"one-sided-{mode}", [src], [dst], file_count=3, file_size=300_000, create_sources=True,
                   checksum_mode=mode)  # fmt: skip
    run = drive(obj)
    assert run.files_done == 3, list(Transfer.objects.filter(run=run).values_list("error_message"))
    for t in Transfer.objects.filter(run=run):
        expected = f"{adler32(door1.local_path(url_path(t.source))):08x}"
        assert t.source_checksum == expected
        assert t.destination_checksum == (expected if mode == "target" else "")

"""Existing data as sources, on two real XRootD doors: a folder of files the site already had,
and a list of URLs. Checked against the doors' disks: every copy has its source's size and
adler32 (computed here from the bytes, not taken from StorageOps), and the source folder is the
same before and after, clean-up included."""

from __future__ import annotations

import random
import subprocess
import zlib
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError

from campaigns.choices import RunState
from campaigns.models import Campaign, Run, Transfer
from campaigns.runs.engines.gfal2.client import CopyOptions, Gfal2Copier
from campaigns.runs.existing_sources import list_existing
from campaigns.runs.lifecycle import RunDriver
from campaigns.runs.sources import PreparationFailed
from campaigns.runs.starting import create_run
from storageops.validators import parse_url_list
from tests.support.factories import campaign, endpoint
from tests.support.silent_servers import silent_tcp_server

pytestmark = pytest.mark.django_db(transaction=True)

# Mixed sizes, as a real dataset: empty, odd, a few bytes over a power of two, a few MB.
SIZES = [0, 1, 4095, 4097, 65_536, 100_003, 1_000_000, 2_500_001, 3 * 2**20 + 7, 17, 512, 999_999,
         250_000, 4_000_000, 31, 123_456, 2**20, 777_777, 8192, 1_500_000]  # fmt: skip


def adler32(path: Path) -> str:
    value = 1
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            value = zlib.adler32(chunk, value)
    return f"{value:08x}"


def put_dataset(door, folder: str) -> Path:
    """Files written straight onto the door's disk, as a site's data would be; a sub-folder too."""
    root = door.data_dir / "data" / folder
    (root / "nested").mkdir(parents=True)
    rng = random.Random(folder)
    for i, size in enumerate(SIZES):
        (root / f"file-{i:02d}.dat").write_bytes(rng.randbytes(size))
    (root / "nested" / "not-listed.dat").write_bytes(b"a sub-folder is not part of the listing")
    subprocess.run(["chown", "-R", "nobody:nogroup", str(root.parent)], check=True)  # the door runs as nobody
    return root


def state_of(root: Path) -> dict[str, tuple]:
    """Every entry below the folder: size, mtime, inode and checksum."""
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns, p.stat().st_ino, adler32(p))
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def landed(door, run: Run) -> dict[str, Path]:
    return {
        t.source: door.data_dir / t.destination.split("//", 2)[2].lstrip("/") for t in Transfer.objects.filter(run=run)
    }


def existing(door1, door2, name: str, **fields) -> Campaign:
    src = endpoint(f"{name}-src", door1.root_url_for("/data/"))
    dst = endpoint(f"{name}-dst", door2.root_url_for(f"/data/{name}-copies/"))
    defaults = {"source_path": name, "source_listing": "folder", "concurrency_steps": [4], "cleanup": "delete",
                "checksum_mode": "both"}  # fmt: skip
    obj = campaign(name, [src], [dst], **{**defaults, **fields})
    obj.full_clean()
    return obj


def test_a_folder_of_mixed_sizes_is_copied_read_only_each_copy_equal_to_its_source(xrootd_pair):
    door1, door2 = xrootd_pair
    root = put_dataset(door1, "dataset-a")
    before = state_of(root)
    run = create_run(existing(door1, door2, "dataset-a"), trigger="command")
    RunDriver(run.pk).drive()
    run.refresh_from_db()

    assert run.state == RunState.SUCCEEDED, (run.state, run.error)
    # The listing: the folder's 20 files, not the sub-folder's, sizes and checksums from the storage.
    listing = {Path(e["url"]).name: e for e in run.snapshot["listing"]}
    assert set(listing) == {f"file-{i:02d}.dat" for i in range(len(SIZES))}
    for name, entry in listing.items():
        assert (entry["size"], entry["checksum"]) == ((root / name).stat().st_size, adler32(root / name))
    assert (run.planned_files, run.planned_bytes) == (20, sum(SIZES))
    rows = Transfer.objects.filter(run=run)
    assert rows.count() == 20 and not rows.exclude(state="succeeded").exists()
    for t in rows:
        source = root / Path(t.source).name
        assert t.size == source.stat().st_size
        assert t.source_checksum == adler32(source)
    # cleanup=delete removed the copies (proved by size and checksum first), and only them.
    assert not (door2.data_dir / "data" / "dataset-a-copies" / f"run-{run.pk}").exists()
    assert state_of(root) == before  # nothing written, touched or deleted on the source


def test_copies_of_a_url_list_land_with_their_sources_bytes(xrootd_pair):
    door1, door2 = xrootd_pair
    root = put_dataset(door1, "dataset-b")
    before = state_of(root)
    picked = [0, 3, 7, 13]
    urls = [door1.root_url_for(f"/data/dataset-b/file-{i:02d}.dat") for i in picked]
    text = "# four files of the dataset\n" + "\n".join([*urls, urls[0], ""])  # a duplicate, a blank line
    obj = existing(door1, door2, "dataset-b", source_listing="urls", source_urls=text, cleanup="keep")
    run = create_run(obj, trigger="command")
    RunDriver(run.pk).drive()
    run.refresh_from_db()
    assert run.state == RunState.SUCCEEDED, (run.state, run.error)
    copies = landed(door2, run)
    assert sorted(copies) == sorted(urls)  # each once, the duplicate dropped
    for url, path in copies.items():
        source = root / Path(url).name
        assert (path.stat().st_size, adler32(path)) == (source.stat().st_size, adler32(source))
    assert state_of(root) == before


def test_existing_data_that_cannot_be_read_fails_the_run_at_preparation_with_the_reason(xrootd_pair):
    door1, door2 = xrootd_pair
    missing = create_run(existing(door1, door2, "no-such-folder"), trigger="command")
    RunDriver(missing.pk).drive()
    missing.refresh_from_db()
    assert missing.state == RunState.FAILED and "could not be listed" in missing.stop_reason, missing.stop_reason
    empty_root = door1.data_dir / "data" / "empty-folder"
    empty_root.mkdir(parents=True)
    subprocess.run(["chown", "nobody:nogroup", str(empty_root)], check=True)
    empty = create_run(existing(door1, door2, "empty-folder"), trigger="command")
    RunDriver(empty.pk).drive()
    empty.refresh_from_db()
    assert empty.state == RunState.FAILED and "No file in 'empty-folder'" in empty.stop_reason, empty.stop_reason
    assert not Transfer.objects.filter(run__in=[missing, empty]).exists()


class FirstListingsHang:
    """The run's real gfal2 storage, whose first `hangs` listings go to a door that accepts and
    never answers (gfal2 once left a healthy door's listing unanswered for the whole deadline)."""

    def __init__(self, storage: Gfal2Copier, silent_port: int, hangs: int) -> None:
        self.storage, self.silent, self.hangs, self.asked = storage, f"root://127.0.0.1:{silent_port}//data/", hangs, 0

    def list_files(self, url: str):
        self.asked += 1
        return self.storage.list_files(self.silent if self.asked <= self.hangs else url)

    def __getattr__(self, name: str):
        return getattr(self.storage, name)


@pytest.mark.parametrize("hangs", [1, 2])
def test_a_listing_left_unanswered_is_asked_once_more_then_fails_with_the_reason(xrootd_pair, hangs, caplog):
    door1, door2 = xrootd_pair
    put_dataset(door1, f"hung-{hangs}")
    run = create_run(existing(door1, door2, f"hung-{hangs}", timeout=3), trigger="command")
    storage = FirstListingsHang(Gfal2Copier(CopyOptions(timeout=3)), 0, hangs)
    with silent_tcp_server() as silent, caplog.at_level("WARNING", logger="campaigns.runs.existing_sources"):
        storage.silent = f"root://127.0.0.1:{silent.port}//data/"
        if hangs == 1:
            listing = list_existing(run.snapshot, storage)
            assert sorted(Path(e["url"]).name for e in listing) == [f"file-{i:02d}.dat" for i in range(len(SIZES))]
        else:
            with pytest.raises(PreparationFailed, match=r"could not be listed: .*no answer within StorageOps' 3 s"):
                list_existing(run.snapshot, storage)
    assert storage.asked == 2
    assert "no answer within StorageOps' 3 s deadline" in caplog.text and "asking once more" in caplog.text


def test_existing_data_settings_are_checked_with_clear_errors(xrootd_pair, settings):
    door1, door2 = xrootd_pair
    with pytest.raises(ValidationError) as caught:
        existing(door1, door2, "bad-1", create_sources=True, direction="both")
    assert set(caught.value.message_dict) == {"create_sources", "direction"}
    with pytest.raises(ValidationError) as caught:
        existing(door1, door2, "bad-2", source_listing="urls", source_urls="ftp://elsewhere/x")
    assert "Unsupported URL scheme 'ftp'" in caught.value.message_dict["source_urls"][0]
    with pytest.raises(ValidationError, match="names a folder"):
        parse_url_list("root://door:1094//data/folder/", 10)
    with pytest.raises(ValidationError, match="3 URLs: at most 2"):
        parse_url_list("root://d//a\nroot://d//b\nroot://d//c", 2)
    # Too many files in a folder: the run says so, and reads none of them.
    put_dataset(door1, "dataset-c")
    settings.STORAGEOPS_MAX_LISTED_SOURCES = 5
    run = create_run(existing(door1, door2, "dataset-c"), trigger="command")
    RunDriver(run.pk).drive()
    run.refresh_from_db()
    assert run.state == RunState.FAILED and "more than the 5 files" in run.stop_reason, run.stop_reason

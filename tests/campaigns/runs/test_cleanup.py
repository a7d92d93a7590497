"""Clean-up removes exactly a run's files on a real XRootD server, and nothing else.

What is left is checked twice, independently of gfal2: on the server's disk and with xrdfs.
"""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from campaigns import runs
from campaigns.choices import RunState
from campaigns.models import Run, Transfer
from campaigns.runs import cleanup
from campaigns.runs.engines.gfal2.executor import build_copier
from campaigns.runs.lifecycle import RunDriver
from collectors.models import Event
from tests.support.factories import campaign, endpoint

pytestmark = pytest.mark.django_db(transaction=True)


def xrdfs_ls(server, path: str) -> list[str]:
    out = subprocess.run(
        ["xrdfs", f"127.0.0.1:{server.port}", "ls", path], capture_output=True, text=True, timeout=30, check=False
    )
    return sorted(line.rsplit("/", 1)[-1] for line in out.stdout.split()) if out.returncode == 0 else []


def xrdfs_exists(server, path: str) -> bool:
    out = subprocess.run(
        ["xrdfs", f"127.0.0.1:{server.port}", "stat", path], capture_output=True, text=True, timeout=30, check=False
    )
    return out.returncode == 0


def make_campaign(door1, door2, name: str, **fields):
    src = endpoint(f"{name}-src", door1.root_url_for(f"/data/{name}/"))
    dst = endpoint(f"{name}-dst", door2.root_url_for(f"/data/{name}/"))
    return campaign(
        name, [src], [dst], file_count=6, file_size=200_000, create_sources=True, concurrency_steps=[3], **fields
    )


def test_a_run_deletes_exactly_its_files_at_its_end(xrootd_pair):
    door1, door2 = xrootd_pair
    obj = make_campaign(door1, door2, "clean", cleanup="delete")
    run = runs.create_run(obj, trigger="command")
    runs_dir = "/data/clean/storageops/runs"
    # Neighbours that share the prefix: another run's folder whose name starts like this
    # run's (run-7 and run-70), a file beside the run folders, one outside the campaign.
    survivors = [
        f"{runs_dir}/run-{run.pk}0/f0000000",
        f"{runs_dir}/notes.txt",
        f"/data/clean/storageops/source-copy-{run.pk}",
        "/data/outside-the-prefix.txt",
    ]
    for path in survivors:
        door2.write_local(path, b"keep me")
    # Another run's sources beside this run's, and a file the campaign did not generate.
    sources_dir = "/data/clean/storageops/source"
    source_survivors = [f"{sources_dir}/run-{run.pk}0-sources/200000/src-0000000", f"{sources_dir}/shared.dat"]
    for path in source_survivors:
        door1.write_local(path, b"keep me")

    RunDriver(run.pk).drive()
    run.refresh_from_db()
    assert run.state == RunState.SUCCEEDED, run.error
    assert run.files_done == 6
    report = run.summary["cleanup"]
    assert (report["deleted"], report["failed"], report["refused"]) == (6, 0, 0), report
    assert report["folders_removed"] == 1

    run_dir = f"{runs_dir}/run-{run.pk}"
    assert not door2.local_path(run_dir).exists()
    assert not xrdfs_exists(door2, run_dir)
    for path in survivors:
        assert door2.local_path(path).read_bytes() == b"keep me", path
        assert xrdfs_exists(door2, path), path
    assert xrdfs_ls(door2, runs_dir) == sorted(["notes.txt", f"run-{run.pk}0"])
    # The sources this run generated were its own (run-<id>-sources): deleted with their folders.
    sources = report["sources"]
    assert (sources["deleted"], sources["failed"], sources["refused"]) == (6, 0, 0), sources
    assert sources["folders_removed"] == 2  # <size>/ and run-<id>-sources/
    assert not xrdfs_exists(door1, f"{sources_dir}/run-{run.pk}-sources")
    assert xrdfs_ls(door1, sources_dir) == sorted(["shared.dat", f"run-{run.pk}0-sources"])
    for path in source_survivors:
        assert door1.local_path(path).read_bytes() == b"keep me", path
    event = Event.objects.get(run_id=run.pk, summary__startswith="Clean-up")
    assert "6 files deleted" in event.summary and "6 source files deleted" in event.summary


def test_paths_outside_the_run_folder_are_refused_and_recorded(xrootd_pair):
    door1, door2 = xrootd_pair
    obj = make_campaign(door1, door2, "refuse")  # keeps its files: clean-up is called by hand below
    run = runs.create_run(obj, trigger="command")
    RunDriver(run.pk).drive()
    run.refresh_from_db()
    assert run.files_done == 6 and "cleanup" not in run.summary
    run_dir = f"/data/refuse/storageops/runs/run-{run.pk}"
    assert len(xrdfs_ls(door2, run_dir)) == 6

    # Rows that point outside the run folder (a corrupted or hostile record) must not be obeyed.
    victim = door2.write_local("/data/refuse/storageops/victim.txt", b"not yours")
    first, second, third = Transfer.objects.filter(run=run).order_by("index")[:3]
    first.destination = door2.root_url_for(f"{run_dir}/") + "../../victim.txt"
    second.destination = door2.root_url_for("/data/refuse/storageops/victim.txt")
    third.destination = door1.root_url_for(f"{run_dir}/f0000002")  # right path, wrong server
    Transfer.objects.bulk_update([first, second, third], ["destination"])
    door2.local_path(f"{run_dir}/f0000003").unlink()  # already gone: absent, not a failure

    report = cleanup.cleanup_run(Run.objects.get(pk=run.pk), build_copier(run.snapshot))
    assert (report["deleted"], report["absent"], report["refused"], report["failed"]) == (2, 1, 3, 0), report
    assert len(report["errors"]) == 3 and all(e.startswith("refused") for e in report["errors"])
    assert victim.read_bytes() == b"not yours"
    # The files the refused rows were really about stay where they are.
    assert xrdfs_ls(door2, run_dir) == ["f0000000", "f0000001", "f0000002"]
    run.refresh_from_db()
    assert run.summary["cleanup"]["refused"] == 3
    assert "3 refused" in Event.objects.get(run_id=run.pk, summary__startswith="Clean-up").summary


@pytest.mark.parametrize(
    ("url", "inside"),
    [
        ("root://h:1094//data/t/runs/run-7/f0000001", True),
        ("root://h:1094//data/t/runs/run-7/sub/f1", True),
        ("root://h:1094//data/t/runs/run-70/f0000001", False),
        ("root://h:1094//data/t/runs/run-7", False),
        ("root://h:1094//data/t/runs/run-7/../run-8/f1", False),
        ("root://h:1094//data/t/runs/run-7/./f1", True),
        ("root://other:1094//data/t/runs/run-7/f1", False),
        ("davs://h:1094//data/t/runs/run-7/f1", False),
        ("root://h:1094//etc/passwd", False),
    ],
)
def test_inside_prefix(url, inside):
    assert cleanup.inside_prefix(url, "root://h:1094//data/t/runs/run-7/") is inside


def test_a_clean_up_asked_through_the_api_runs_on_a_worker(worker, operator, viewer):
    from rest_framework.test import APIClient

    from storageops.api import tokens
    from tests.support.factories import mock_campaign

    run = runs.create_run(mock_campaign("later", file_count=4), trigger="command")
    assert RunDriver(run.pk).drive() == RunState.SUCCEEDED
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {tokens.create_token(viewer, 'v', 'viewer')[1]}")
    assert client.post(f"/api/v1/runs/{run.pk}/cleanup/").status_code == 403
    client.credentials(HTTP_AUTHORIZATION=f"Token {tokens.create_token(operator, 'o', 'operator')[1]}")
    assert client.post(f"/api/v1/runs/{run.pk}/cleanup/").status_code == 202
    deadline = time.monotonic() + 60
    while "cleanup" not in Run.objects.get(pk=run.pk).summary and time.monotonic() < deadline:
        time.sleep(0.5)
    report = Run.objects.get(pk=run.pk).summary.get("cleanup")
    assert report is not None, worker.log_text()[-3000:]
    assert (report["deleted"], report["failed"], report["refused"]) == (4, 0, 0)

    live = runs.create_run(mock_campaign("live-cleanup", file_count=1), trigger="command")
    refused = client.post(f"/api/v1/runs/{live.pk}/cleanup/")
    assert refused.status_code == 400 and "cannot be cleaned up yet" in refused.json()["error"]["fields"]["state"][0]


def _kept_run(door1, door2, name: str) -> tuple[Run, str]:
    """A finished run that kept its six files on door2; clean-up is called by hand."""
    run = runs.create_run(make_campaign(door1, door2, name), trigger="command")
    RunDriver(run.pk).drive()
    run.refresh_from_db()
    run_dir = f"/data/{name}/storageops/runs/run-{run.pk}"
    assert run.files_done == 6 and len(xrdfs_ls(door2, run_dir)) == 6, run.error
    return run, run_dir


def test_a_file_with_other_content_under_the_runs_name_is_kept_and_reported(xrootd_pair):
    door1, door2 = xrootd_pair
    run, run_dir = _kept_run(door1, door2, "differs")
    # Someone else's data now under two of the run's names: same size other bytes, another size.
    other = os.urandom(200_000)
    door2.write_local(f"{run_dir}/f0000001", other)
    door2.write_local(f"{run_dir}/f0000002", b"a shorter file")

    report = cleanup.cleanup_run(Run.objects.get(pk=run.pk), build_copier(run.snapshot))
    assert (report["deleted"], report["kept_differs"], report["kept_unproven"], report["failed"]) == (4, 2, 0, 0)
    assert sorted(e.split(":", 1)[0] for e in report["errors"]) == ["kept", "kept"], report["errors"]
    assert any("adler32" in e and "f0000001" in e for e in report["errors"])
    assert any("14 bytes on the door" in e and "f0000002" in e for e in report["errors"])
    assert door2.local_path(f"{run_dir}/f0000001").read_bytes() == other
    assert door2.local_path(f"{run_dir}/f0000002").read_bytes() == b"a shorter file"
    assert xrdfs_ls(door2, run_dir) == ["f0000001", "f0000002"]  # the folder stays: not empty
    assert report["folders_removed"] == 0
    event = Event.objects.get(run_id=run.pk, summary__startswith="Clean-up")
    assert "4 files deleted" in event.summary and "2 kept (2 differ from what the run wrote" in event.summary


def test_a_run_folder_replaced_by_a_symlink_deletes_nothing_it_points_to(xrootd_pair):
    door1, door2 = xrootd_pair
    run, run_dir = _kept_run(door1, door2, "symlink")
    # The run's folder becomes a link to another folder holding files of the same names.
    elsewhere = "/data/symlink/precious"
    precious = {f"f{i:07d}": os.urandom(200_000) for i in range(6)}
    for name, data in precious.items():
        door2.write_local(f"{elsewhere}/{name}", data)
    real = door2.local_path(run_dir)
    real.rename(real.with_name(real.name + "-moved"))
    real.symlink_to(door2.local_path(elsewhere), target_is_directory=True)
    assert xrdfs_ls(door2, run_dir) == sorted(precious)  # the door follows the link

    report = cleanup.cleanup_run(Run.objects.get(pk=run.pk), build_copier(run.snapshot))
    assert (report["deleted"], report["kept_differs"], report["failed"]) == (0, 6, 0), report
    assert report["folders_removed"] == 0
    for name, data in precious.items():
        assert door2.local_path(f"{elsewhere}/{name}").read_bytes() == data, name
    assert real.is_symlink()


@pytest.mark.parametrize(
    "url",
    [
        "root://h:1094//data/t/runs/run-7/%2e%2e/run-8/f1",
        "root://h:1094//data/t/runs/run-7/%2E%2E/%2e%2e/b",
        "root://h:1094//data/t/runs/run-7/%252e%252e/run-8/f1",
        "root://h:1094//data/t/runs/run-7/..%2frun-8/f1",
        "root://h:1094//data/t/runs/run-7/f1%00",
    ],
)
def test_encoded_traversal_is_refused(url):
    assert cleanup.inside_prefix(url, "root://h:1094//data/t/runs/run-7/") is False

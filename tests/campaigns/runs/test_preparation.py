"""Preparing a run under its lease: real gfal2 writing sources to real XRootD doors while the
driver renews its lease, answers a cancel, and keeps concurrent runs out of each other's way.

Slow preparations are made by pacing the chunks the real copier streams (gfal2 still writes
every byte to the door): a sleep between chunks, nothing mocked below it.
"""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from campaigns import runs
from campaigns.choices import RunState
from campaigns.models import Run, Transfer
from campaigns.runs import sources
from campaigns.runs.engines.gfal2.executor import build_copier
from campaigns.runs.lifecycle import RunDriver
from campaigns.runs.planning import source_files
from collectors.models import Event
from tests.support.factories import campaign, endpoint

pytestmark = pytest.mark.django_db(transaction=True)
MB = 1024 * 1024


def paced_copier(pause: float, chunks_written: list | None = None):
    """build_copier, with `pause` seconds before each chunk the copier streams."""

    def factory(snapshot):
        copier = build_copier(snapshot)
        write = copier.write

        def paced(url, chunks, size):
            def slowly():
                for chunk in chunks:
                    time.sleep(pause)
                    if chunks_written is not None:
                        chunks_written.append(len(chunk))
                    yield chunk

            write(url, slowly(), size)

        copier.write = paced
        return copier

    return factory


def make(door1, door2, name: str, **fields):
    src = endpoint(f"{name}-src", door1.root_url_for(f"/data/{name}/"))
    dst = endpoint(f"{name}-dst", door2.root_url_for(f"/data/{name}/"))
    defaults = {"file_count": 8, "file_size": 1_000_000, "create_sources": True, "concurrency_steps": [4]}
    return campaign(name, [src], [dst], **{**defaults, **fields})


def in_thread(run_id: int, **driver_args) -> tuple[threading.Thread, dict]:
    out: dict = {}

    def drive():
        try:
            started = time.monotonic()
            out["result"] = RunDriver(run_id, **driver_args).drive()
            out["seconds"] = time.monotonic() - started
        finally:
            connection.close()

    thread = threading.Thread(target=drive, daemon=True)
    thread.start()
    return thread, out


def test_a_preparation_longer_than_the_lease_keeps_it(xrootd_pair, settings):
    settings.STORAGEOPS_RUN_LEASE_SECONDS = 3
    settings.STORAGEOPS_PROGRESS_SECONDS = 1
    door1, door2 = xrootd_pair
    # 8 files of 8 MiB, 2 chunks each paced 4 s: about 8 s of preparation, past two leases.
    run = runs.create_run(make(door1, door2, "prep-lease", file_size=8 * MB), trigger="command")
    thread, out = in_thread(run.pk, copier_factory=paced_copier(4.0))
    takeovers = []
    deadline = time.monotonic() + 60
    while thread.is_alive() and time.monotonic() < deadline:
        time.sleep(1.0)
        if Run.objects.get(pk=run.pk).state == RunState.PENDING:
            # What recover_stale_runs and a redelivered task do: another driver asks for the run.
            takeovers.append(RunDriver(run.pk).drive())
    thread.join(5)
    run.refresh_from_db()
    assert out["result"] == RunState.SUCCEEDED, run.error
    assert run.files_done == 8
    assert len(takeovers) >= 4 and set(takeovers) == {"busy"}, takeovers
    assert out["seconds"] > 2 * settings.STORAGEOPS_RUN_LEASE_SECONDS
    assert Event.objects.filter(run_id=run.pk, kind="run_start").count() == 1
    assert not Event.objects.filter(run_id=run.pk, summary__contains="lost its lease").exists()


def test_a_lost_lease_stops_the_preparation_at_once(xrootd_pair):
    door1, door2 = xrootd_pair
    run = runs.create_run(make(door1, door2, "prep-lost", file_size=80 * MB), trigger="command")
    thread, out = in_thread(run.pk, copier_factory=paced_copier(0.5))
    time.sleep(2.0)
    Run.objects.filter(pk=run.pk).update(executor="someone-else")  # another driver took it over
    thread.join(15)
    assert out.get("result") == "lease lost", out
    assert Event.objects.filter(run_id=run.pk, summary__contains="lost its lease").count() == 1
    assert not Event.objects.filter(run_id=run.pk, kind="run_start").exists()
    assert not Transfer.objects.filter(run=run).exists()


def test_a_cancel_during_preparation_ends_the_run_cancelled_within_seconds(xrootd_pair):
    door1, door2 = xrootd_pair
    written: list[int] = []
    # 400 MiB a file at one 4 MiB chunk a second: minutes of preparation if nothing stopped it.
    run = runs.create_run(make(door1, door2, "prep-cancel", file_size=400 * MB), trigger="command")
    thread, out = in_thread(run.pk, copier_factory=paced_copier(1.0, written))
    deadline = time.monotonic() + 30
    while not written and time.monotonic() < deadline:
        time.sleep(0.1)
    assert written, "no upload started"
    asked = time.monotonic()
    assert runs.request_cancel(Run.objects.get(pk=run.pk))
    thread.join(30)
    took = time.monotonic() - asked
    run.refresh_from_db()
    assert out.get("result") == RunState.CANCELLED
    assert run.state == RunState.CANCELLED and run.stop_reason == "cancelled during preparation"
    assert took < 5.0, took
    assert sum(written) < 8 * 20 * 4 * MB  # stopped long before the 3.2 GB it planned
    assert Event.objects.filter(
        run_id=run.pk, kind="run_end", summary__contains="cancelled during preparation"
    ).exists()
    assert not Event.objects.filter(run_id=run.pk, kind="run_start").exists()


def test_two_runs_of_one_campaign_at_once_both_succeed(xrootd_pair):
    door1, door2 = xrootd_pair
    obj = make(door1, door2, "prep-twins", file_count=16, file_size=4 * MB, source_file_count=4)
    first, second = (runs.create_run(obj, trigger="command") for _ in range(2))
    # Paced so the two preparations overlap, and one's copies read while the other writes.
    threads = [in_thread(run.pk, copier_factory=paced_copier(0.3)) for run in (first, second)]
    for thread, _ in threads:
        thread.join(120)
    assert [out.get("result") for _, out in threads] == [RunState.SUCCEEDED] * 2
    folders = set()
    for run in (first, second):
        run.refresh_from_db()
        assert run.files_done == 16, list(Transfer.objects.filter(run=run).values_list("error_message", flat=True))
        sources_of_run = set(Transfer.objects.filter(run=run).values_list("source", flat=True))
        assert len(sources_of_run) == 4
        folders |= {url.rsplit("/", 2)[0] for url in sources_of_run}
    assert folders == {
        door1.root_url_for(f"/data/prep-twins/storageops/source/run-{r.pk}-sources") for r in (first, second)
    }


def test_streamed_sources_need_no_local_file(xrootd_pair, monkeypatch):
    door1, door2 = xrootd_pair

    def no_local_file(self, size):
        raise AssertionError(f"a local file of {size} bytes was made for a streamed source")

    monkeypatch.setattr(sources._Maker, "local_file", no_local_file)
    obj = make(door1, door2, "prep-stream", file_count=4, file_size=64 * MB, checksum_mode="target")
    run = runs.create_run(obj, trigger="command")
    assert RunDriver(run.pk).drive() == RunState.SUCCEEDED, Run.objects.get(pk=run.pk).error
    # gfal2 checked every destination against the checksum of the data as it was streamed.
    run.refresh_from_db()
    assert run.files_done == 4
    for url in source_files(run.snapshot, run.pk):
        assert door1.local_path("/" + url.split("//", 2)[2]).stat().st_size == 64 * MB


def test_no_room_for_a_temp_file_fails_the_run_with_its_reason(xrootd_https_pair, test_ca, monkeypatch):
    a, b = xrootd_https_pair
    creds = {"bearer_token": "storageops-test", "ca_dir": str(test_ca.ca_dir)}
    src = endpoint("room-src", a.davs_url_for("/data/room/"), **creds)
    dst = endpoint("room-dst", b.davs_url_for("/data/room/"), **creds)
    obj = campaign("prep-room", [src], [dst], file_count=2, file_size=10**9, create_sources=True)
    real = sources.shutil.disk_usage
    monkeypatch.setattr(sources.shutil, "disk_usage", lambda path: real(path)._replace(free=5 * 10**8))
    run = runs.create_run(obj, trigger="command")
    assert RunDriver(run.pk).drive() == RunState.FAILED
    run.refresh_from_db()
    assert run.stop_reason.startswith("no room to generate the source files: they need 1,000,000,000 bytes")
    assert run.stop_reason != "driver error" and not run.error
    assert Event.objects.filter(run_id=run.pk, kind="run_incident", summary__contains="no room to generate").exists()
    assert Event.objects.filter(run_id=run.pk, kind="run_end", summary__contains="no room to generate").exists()


def test_a_retry_reads_its_first_runs_sources_written_again_after_their_clean_up(
    xrootd_pair, django_capture_on_commit_callbacks
):
    door1, door2 = xrootd_pair
    obj = make(door1, door2, "prep-retry", cleanup="delete", checksum_mode="target", max_bytes=4_000_000,
               concurrency_steps=[1])  # fmt: skip
    first = runs.create_run(obj, trigger="command")
    RunDriver(first.pk).drive()
    first.refresh_from_db()
    assert first.state == RunState.PARTIAL and first.files_done < 8, (first.state, first.files_done)
    folder = f"/data/prep-retry/storageops/source/run-{first.pk}-sources"
    assert first.summary["cleanup"]["sources"]["deleted"] == 8
    assert not door1.local_path(folder).exists()

    with django_capture_on_commit_callbacks(execute=False):  # driven here, not by a worker
        retry = runs.retry_failed(first, trigger="command")
    assert RunDriver(retry.pk).drive() == RunState.SUCCEEDED, Run.objects.get(pk=retry.pk).error
    copied = Transfer.objects.filter(run=retry)
    assert copied.count() == 8 - first.files_done
    assert all(f"/run-{first.pk}-sources/" in t.source for t in copied)
    # gfal2 checked each copy against the checksum of the data the retry generated: the first
    # run's bytes, made again from the same seed.
    first_sums = set(Transfer.objects.filter(run=first, state="succeeded").values_list("source_checksum", flat=True))
    assert set(copied.values_list("source_checksum", flat=True)) == first_sums


def test_a_cancel_aborts_uploads_of_temp_files_through_gfal2(xrootd_https_pair, test_ca):
    """davs sources go through a local file and gfal2's filecopy, which only gfal2's cancel stops."""
    a, b = xrootd_https_pair
    creds = {"bearer_token": "storageops-test", "ca_dir": str(test_ca.ca_dir)}
    src = endpoint("abort-src", a.davs_url_for("/data/abort/"), **creds)
    dst = endpoint("abort-dst", b.davs_url_for("/data/abort/"), **creds)
    obj = campaign("prep-abort", [src], [dst], file_count=4, file_size=512 * MB, create_sources=True)
    started: list[float] = []

    def recording_copier(snapshot):
        copier = build_copier(snapshot)
        upload = copier.upload

        def recorded(local_path, url):
            started.append(time.monotonic())
            upload(local_path, url)

        copier.upload = recorded
        return copier

    run = runs.create_run(obj, trigger="command")
    thread, out = in_thread(run.pk, copier_factory=recording_copier)
    deadline = time.monotonic() + 60
    while not started and time.monotonic() < deadline:
        time.sleep(0.1)
    assert started, "no upload started"
    time.sleep(1.0)
    asked = time.monotonic()
    assert runs.request_cancel(Run.objects.get(pk=run.pk))
    thread.join(30)
    took = time.monotonic() - asked
    run.refresh_from_db()
    assert out.get("result") == RunState.CANCELLED and run.stop_reason == "cancelled during preparation"
    assert took < 5.0, took
    folder = a.local_path(f"/data/abort/storageops/source/run-{run.pk}-sources/{512 * MB}")
    sizes = [path.stat().st_size for path in folder.iterdir()] if folder.exists() else []
    assert sum(sizes) < 4 * 512 * MB, sizes  # the uploads did not run to their end

"""The FTS engine against a double of FTS3's REST server that copies for real with gfal2
between the two test XRootD doors (tests/support/fts_double.py).

What is checked against what: every Transfer record against the double's own record of the
file it reported, the files at the destination against the sources on disk (read directly,
hashed with zlib), and the link limits against the double's configuration history.
"""

from __future__ import annotations

import os
import threading
import time
import zlib
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.db import connection

from campaigns import runs
from campaigns.choices import RunState
from campaigns.models import Run, RunStep, Transfer
from campaigns.runs.engines.fts.client import parse_time
from campaigns.runs.engines.fts.models import FtsInstance, FtsLinkLimit
from campaigns.runs.engines.fts.store import with_ids
from campaigns.runs.lifecycle import RunDriver
from campaigns.runs.planning import source_path
from campaigns.spec import RunSpec
from collectors.models import Event
from tests.support.factories import campaign, endpoint
from tests.support.fts_double import MB, FtsDouble
from tests.support.workers import celery_worker

pytestmark = pytest.mark.django_db(transaction=True)
TOKEN = "fts-test-token"
LINK = ("root://127.0.0.1", "root://127.0.0.1")  # FTS names storage elements without the port


@pytest.fixture
def fts():
    double = FtsDouble(optimizer_interval=1.0, token=TOKEN).start()
    try:
        yield double
    finally:
        double.stop()


def instance(double: FtsDouble, name: str = "fts-double", **fields) -> FtsInstance:
    values = {"bearer_token": TOKEN, "files_per_job": 20, "manage_link_limits": True, "poll_seconds": 0.3}
    values.update(fields)
    return FtsInstance.objects.create(name=name, url=double.url, **values)


def url_path(url: str) -> str:
    return "/" + urlsplit(url).path.lstrip("/")


def adler32(path: Path) -> int:
    return zlib.adler32(path.read_bytes(), 1)


def write_sources(door, prefix: str, folder: str, count: int, size: int, skip: set[int] = frozenset()) -> None:
    data = os.urandom(size)
    for number in range(count):
        if number not in skip:
            door.write_local(f"{prefix}{source_path(folder, size, number)}", data)


def test_run_of_60_files_matches_what_fts_reported(xrootd_pair, fts, client, viewer):
    door1, door2 = xrootd_pair
    size, count = 200_000, 60
    src = endpoint("fts-src", door1.root_url_for("/data/fts1/"))
    dst = endpoint("fts-dst", door2.root_url_for("/data/fts1/"))
    # The site's own link config, which the run must pin per step and then put back.
    fts.links["site-link"] = {"source": LINK[0], "destination": LINK[1], "symbolicname": "site-link",
                              "min_active": 2, "max_active": 50, "nostreams": 0, "optimizer_mode": 2}  # fmt: skip
    obj = campaign(
        "fts-60", [src], [dst], engine="fts", engine_options={"instance": instance(fts).pk, "priority": 4},
        file_count=count, file_size=size, checksum_mode="both", concurrency_steps=[3, 6], step_files=30,
    )  # fmt: skip
    # Source 7 is missing: FTS reports "SOURCE [2] Failed to stat file (No such file or directory)".
    write_sources(door1, "/data/fts1/", obj.source_path, count, size, skip={7})
    run = runs.create_run(obj, trigger="command")
    # One planned transfer failed (its source is missing): the run is partial, not succeeded.
    assert RunDriver(run.pk).drive() == RunState.PARTIAL
    run.refresh_from_db()
    assert (run.files_done, run.files_failed, run.files_skipped) == (count - 1, 1, 0)

    transfers = list(with_ids(Transfer.objects).filter(run=run).order_by("index"))
    reported = {f["file_id"]: f for f in fts.files.values()}
    assert len(reported) == count and {t.fts_file_id for t in transfers} == set(reported)
    state = {"FINISHED": "succeeded", "FAILED": "failed"}
    for t in transfers:
        f = reported[t.fts_file_id]
        assert f["file_metadata"]["transfer"] == t.pk and f["file_metadata"]["run"] == run.pk
        assert (f["source_surl"], f["dest_surl"], f["job_id"]) == (t.source, t.destination, t.fts_job_id)
        assert t.state == state[f["file_state"]], (t.index, f)
        assert t.started_at == parse_time(f["start_time"]) and t.finished_at == parse_time(f["finish_time"])
        assert t.duration == f["tx_duration"]
        assert t.transfer_host == f["transfer_host"] != ""
        assert t.error_message == f["reason"]
        if t.state == "succeeded":
            assert t.bytes_transferred == f["filesize"] == size
            assert t.throughput_bps == pytest.approx(f["throughput"] * MB)
        else:
            assert t.bytes_transferred == 0 and t.throughput_bps is None
    failed = [t for t in transfers if t.state == "failed"]
    assert [t.index for t in failed] == [7]
    assert fts.jobs[failed[0].fts_job_id]["job_state"] == "FINISHEDDIRTY"  # one file of its job failed
    assert failed[0].error_message == "SOURCE [2] Failed to stat file (No such file or directory)"
    assert (failed[0].error_category, failed[0].error_code) == ("not_found", 2)

    # The bytes really arrived (read from the doors' disks, not through gfal2 or FTS).
    for t in transfers:
        if t.state == "succeeded":
            dst_file = door2.local_path(url_path(t.destination))
            assert dst_file.stat().st_size == size
            assert adler32(dst_file) == adler32(door1.local_path(url_path(t.source)))

    # Bulk jobs of files_per_job files; each step's concurrency pinned on the link, then restored.
    assert fts.submissions >= count // 20
    assert [s.concurrency for s in RunStep.objects.filter(run=run)] == [3, 6]
    posts = [(p["min_active"], p["max_active"]) for p in fts.link_posts if p["symbolicname"] == "site-link"]
    assert posts == [(3, 3), (6, 6), (2, 50)]
    assert (fts.links["site-link"]["min_active"], fts.links["site-link"]["max_active"]) == (2, 50)
    # FTS obeys a range from its optimizer's next pass (None: no value yet for the new link, when
    # StorageOps alone held the step): never more copies at once than the value in force.
    assert fts.peaks.get((*LINK, None), 0) <= 3 and fts.peaks.get((*LINK, 3), 0) <= 3
    assert fts.peaks.get((*LINK, 6), 0) <= 6
    assert fts.peaks.get((*LINK, 6), 0) > 3  # the second step really ran wider
    # Each file started under a value within its own step's: a step ends once FTS started all of its files.
    under = {(t.step, fts.started_under[t.fts_file_id]) for t in transfers if t.state == "succeeded"}
    assert {(0, 3), (1, 6)} <= under <= {(0, None), (0, 3), (1, 3), (1, 6)}
    limit = FtsLinkLimit.objects.get(run=run)
    assert limit.previous["max_active"] == 50 and limit.restored_at is not None
    changes = list(Event.objects.filter(run_id=run.pk, kind="fts_config", who="").order_by("time"))
    assert [e.summary for e in changes][-1].startswith("FTS link root://127.0.0.1 → root://127.0.0.1 restored")
    # Pinned, put in force by FTS's optimizer (seen in its evolution), for each step; then restored.
    kinds = [e.summary.split(" ")[1] for e in changes]
    assert kinds == ["link", "optimizer", "link", "optimizer", "link"], [e.summary for e in changes]
    # FTS's own record of the window: the audit entries as events, the optimizer's decisions kept.
    assert Event.objects.filter(run_id=run.pk, kind="fts_config", who="token-user").count() == 3
    decisions = run.summary["fts"]["optimizer"][f"{LINK[0]} {LINK[1]}"]
    assert [d["active"] for d in decisions] == sorted(d["active"] for d in decisions)
    assert {d["active"] for d in decisions} == {3, 6}
    assert decisions[0]["rationale"] == "No information. Use configured range max."
    assert {d["rationale"] for d in decisions if d["active"] == 6} == {"Range fixed"}
    # The run page says what was changed on FTS and that it was put back.
    client.force_login(viewer)
    page = client.get(run.get_absolute_url()).content.decode()
    assert "Link limits set by this run" in page and "site-link" in page and "NOT restored" not in page


def run_in_thread(run_id: int) -> tuple[threading.Thread, dict]:
    result: dict = {}

    def target() -> None:
        try:
            result["state"] = RunDriver(run_id).drive()
        finally:
            connection.close()

    thread = threading.Thread(target=target)
    thread.start()
    return thread, result


def _step_file_active(fts: FtsDouble, run: Run, step: int, waiting: int = 0) -> bool:
    """FTS is copying a file of the run's step `step` (0-based) right now, with at least
    ``waiting`` more of the step's files submitted and not yet started."""
    jobs = set(
        with_ids(Transfer.objects)
        .filter(run=run, step=step)
        .exclude(fts_job_id="")
        .values_list("fts_job_id", flat=True)
    )
    with fts.lock:
        states = [f["file_state"] for f in fts.files.values() if f["job_id"] in jobs]
    return "ACTIVE" in states and states.count("SUBMITTED") >= waiting


def test_cancel_deletes_the_jobs_and_restores_the_link_set_per_step(xrootd_pair, fts):
    door1, door2 = xrootd_pair
    size, count = 2_000_000, 40
    src = endpoint("fts-c-src", door1.root_url_for("/data/fts2/"))
    dst = endpoint("fts-c-dst", door2.root_url_for("/data/fts2/"))
    obj = campaign(
        "fts-cancel", [src], [dst], engine="fts", engine_options={"instance": instance(fts, files_per_job=5).pk},
        file_count=count,
        file_size=size, checksum_mode="both", concurrency_steps=[1, 2], step_files=16,
    )  # fmt: skip
    write_sources(door1, "/data/fts2/", obj.source_path, count, size)
    run = runs.create_run(obj, trigger="command")
    thread, result = run_in_thread(run.pk)
    deadline = time.monotonic() + 60
    # Cancel early in the second step, once FTS has started one of its files and has several
    # more waiting: a file FTS had not started when its job was deleted is recorded skipped, not
    # cancelled. A busy machine once had the whole step still SUBMITTED when the cancel arrived,
    # and once (8 files a step) every file started before the cancel reached FTS.
    while not _step_file_active(fts, run, step=1, waiting=4):
        assert time.monotonic() < deadline, ("step 2 not under way in 60 s", result, list(fts.files.values())[:3])
        time.sleep(0.05)
    assert RunStep.objects.filter(run=run, index=1).exists()
    assert runs.request_cancel(run)
    thread.join(60)
    assert not thread.is_alive() and result["state"] == RunState.CANCELLED
    run.refresh_from_db()
    assert run.state == RunState.CANCELLED
    # Every job the run had in FTS was deleted there, and its files' states were recorded.
    run_jobs = set(
        with_ids(Transfer.objects).filter(run=run).exclude(fts_job_id="").values_list("fts_job_id", flat=True)
    )
    assert run_jobs and all(fts.jobs[j]["job_state"] in ("CANCELED", "FINISHED") for j in run_jobs)
    assert any(fts.jobs[j]["job_state"] == "CANCELED" for j in run_jobs)
    # The files FTS cancelled after starting them: a copy that ended whole before FTS's kill (4 s
    # after the cancel) is a finished copy that says FTS recorded it CANCELED; the others are cancelled.
    started = with_ids(Transfer.objects).filter(run=run, started_at__isnull=False).exclude(fts_job_id="")
    stopped = [t for t in started if fts.files[t.fts_file_id]["file_state"] == "CANCELED"]
    assert stopped
    for t in stopped:
        f = fts.files[t.fts_file_id]
        assert f["reason"] == "Job canceled by the user"
        if t.state == "succeeded":
            assert t.complete_on_destination and t.error_message.startswith(f"FTS recorded it CANCELED ({f['reason']})")
            assert t.bytes_transferred == size and t.finished_at <= parse_time(f["finish_time"])
        else:
            assert (
                t.state == "cancelled" and t.error_message.startswith(f["reason"]) and t.error_category == "cancelled"
            )
            # FTS's finish time, also for a file cancelled while copying (FTS writes it at its kill).
            assert t.finished_at == parse_time(f["finish_time"]) is not None
    # A file FTS never started: skipped, no duration, FTS's finish time.
    never = with_ids(Transfer.objects).filter(run=run, started_at__isnull=True, fts_file_id__isnull=False)
    assert never.exists()
    for t in never:
        f = fts.files[t.fts_file_id]
        assert t.state == "skipped" and t.duration is None and t.finished_at == parse_time(f["finish_time"])
    assert run.files_done + run.files_failed + run.files_cancelled + run.files_skipped == count
    assert not with_ids(Transfer.objects).filter(run=run, state__in=["queued", "active"]).exists()
    # Pinned per step (1, then 2), then the link config StorageOps made is gone: FTS is as it was.
    name = f"storageops-run{run.pk}-0"
    assert [(p["min_active"], p["max_active"]) for p in fts.link_posts if p["symbolicname"] == name] == [(1, 1), (2, 2)]
    assert name not in fts.links and set(fts.links) == {"*"}
    assert FtsLinkLimit.objects.get(run=run).restored_at is not None
    assert Event.objects.filter(run_id=run.pk, kind="fts_config", summary__contains="config removed").exists()


def test_a_refused_submission_fails_the_run_with_fts_message(xrootd_pair, tmp_path):
    door1, door2 = xrootd_pair
    double = FtsDouble(optimizer_interval=1.0, delegated=False).start()  # X.509 without a delegated proxy: 419
    try:
        proxy = tmp_path / "x509up"
        proxy.write_text("not used over plain HTTP")
        src = endpoint("fts-r-src", door1.root_url_for("/data/fts3/"))
        dst = endpoint("fts-r-dst", door2.root_url_for("/data/fts3/"))
        obj = campaign("fts-refused", [src], [dst], engine="fts", file_count=5,
                       engine_options={"instance": instance(double, bearer_token="",
                                                            x509_cert=str(proxy)).pk})  # fmt: skip
        run = runs.create_run(obj, trigger="command")
        assert RunDriver(run.pk).drive() == RunState.FAILED
    finally:
        double.stop()
    run.refresh_from_db()
    assert "419" in run.stop_reason and "No delegation found" in run.stop_reason
    assert run.files_skipped == 5 and double.submissions == 0


@pytest.mark.slow
def test_a_worker_on_the_transfers_queue_alone_drives_an_fts_run(xrootd_pair, fts, log_dir, settings):
    """Started like any run (runs.start_run): the FTS driver is a transfers-queue task, as every driver."""
    door1, door2 = xrootd_pair
    src = endpoint("fts-w-src", door1.root_url_for("/data/fts4/"))
    dst = endpoint("fts-w-dst", door2.root_url_for("/data/fts4/"))
    # Sources generated and uploaded by StorageOps: their known adler32 goes to FTS with each file.
    obj = campaign("fts-worker", [src], [dst], engine="fts", file_count=12, file_size=50_000, concurrency_steps=[4],
                   create_sources=True, source_file_count=3, checksum_mode="target",
                   engine_options={"instance": instance(fts, manage_link_limits=False,
                                                        files_per_job=4).pk})  # fmt: skip
    worker = celery_worker(log_dir, queues=settings.STORAGEOPS_TRANSFERS_QUEUE)
    try:
        worker.wait_for_log("ready.", timeout=60)
        run = runs.start_run(obj, trigger="command")
        deadline = time.monotonic() + 90
        while not Run.objects.get(pk=run.pk).finished_at:
            assert time.monotonic() < deadline, worker.log_text()[-3000:]
            time.sleep(0.5)
    finally:
        worker.stop()
    run.refresh_from_db()
    assert (run.state, run.files_done) == (RunState.SUCCEEDED, 12)
    # Without link management StorageOps itself kept at most 4 files in FTS at once.
    assert max(n for (*link, _), n in fts.peaks.items() if tuple(link) == LINK) <= 4
    assert not fts.link_posts
    for t in with_ids(Transfer.objects).filter(run=run):
        expected = f"{adler32(door1.local_path(url_path(t.source))):08x}"
        assert fts.files[t.fts_file_id]["checksum"] == f"adler32:{expected}" == f"adler32:{t.destination_checksum}"
        assert adler32(door2.local_path(url_path(t.destination))) == int(expected, 16)
    assert {job["verify_checksum"] for job in fts.jobs.values()} == {"t"}


def test_without_the_config_role_the_run_fails_before_submitting(xrootd_pair):
    door1, door2 = xrootd_pair
    double = FtsDouble(optimizer_interval=1.0, token=TOKEN, config_role=False).start()
    try:
        src = endpoint("fts-n-src", door1.root_url_for("/data/fts5/"))
        dst = endpoint("fts-n-dst", door2.root_url_for("/data/fts5/"))
        options = {"instance": instance(double).pk}
        obj = campaign("fts-norole", [src], [dst], engine="fts", file_count=5, engine_options=options)
        run = runs.create_run(obj, trigger="command")
        assert RunDriver(run.pk).drive() == RunState.FAILED
    finally:
        double.stop()
    run.refresh_from_db()
    assert run.stop_reason.startswith("Could not pin the link limit on FTS: FTS 403: Not enough permissions")
    assert double.submissions == 0 and run.files_skipped == 5 and not FtsLinkLimit.objects.filter(run=run).exists()


def test_a_resumed_driver_takes_over_the_jobs_already_in_fts(xrootd_pair, fts):
    """A driver died after submitting: the next one polls those jobs instead of resubmitting."""
    from datetime import timedelta

    from django.utils import timezone

    from campaigns.runs import store as transfer_store
    from campaigns.runs.engines.fts import store as fts_store
    from campaigns.runs.engines.fts.client import FtsClient, FtsSettings, JobOptions, job_body
    from campaigns.runs.engines.fts.options import FtsOptions
    from campaigns.runs.planning import plan

    door1, door2 = xrootd_pair
    src = endpoint("fts-r2-src", door1.root_url_for("/data/fts6/"))
    dst = endpoint("fts-r2-dst", door2.root_url_for("/data/fts6/"))
    obj = campaign("fts-resume", [src], [dst], engine="fts", file_count=8, file_size=10_000,
                   engine_options={"instance": instance(fts, manage_link_limits=False).pk})  # fmt: skip
    write_sources(door1, "/data/fts6/", obj.source_path, 8, 10_000)
    run = runs.create_run(obj, trigger="command")
    # What the dead driver had done: plan written, 5 transfers claimed and submitted as one job.
    transfer_store.insert_plan(run.pk, plan(run.snapshot, run.pk))
    stale = timezone.now() - timedelta(hours=1)
    Run.objects.filter(pk=run.pk).update(state="running", started_at=stale, executor="dead", heartbeat_at=stale)
    RunStep.objects.create(run=run, index=0, concurrency=2, started_at=stale)
    jobs = transfer_store.claim(run.pk, 5, 0, "dead")
    client = FtsClient(FtsSettings(url=fts.url, bearer_token=TOKEN))
    job_id = client.submit(
        job_body(jobs, JobOptions.from_spec(RunSpec.of(run), FtsOptions.of(run.snapshot)), {"run": run.pk})
    )
    fts_store.mark_submitted(run.pk, [j.id for j in jobs], job_id, "dead")

    assert RunDriver(run.pk).drive() == RunState.SUCCEEDED
    run.refresh_from_db()
    assert (run.files_done, run.files_failed, run.files_skipped) == (8, 0, 0)
    # The adopted job is polled, not resubmitted; the 3 files it did not hold go in new jobs of at
    # most the step's concurrency (2). How many jobs depends on how FTS's slots free up (two at
    # one poll: 2 + 1; one at a time on a busy machine: 1 + 1 + 1), not on the rule.
    later = [files for jid, files in fts.job_files.items() if jid != job_id]
    assert sorted(len(f) for f in later) in ([1, 2], [1, 1, 1]) and fts.submissions == 1 + len(later)
    assert with_ids(Transfer.objects).filter(run=run, fts_job_id=job_id).count() == 5
    assert all(f["file_state"] == "FINISHED" for f in fts.files.values()) and len(fts.files) == 8


def test_over_https_the_server_is_verified_and_x509_identifies_the_user(xrootd_pair, test_ca):
    """Verification is on by default: an FTS whose CA the worker does not know is refused."""
    door1, door2 = xrootd_pair
    cert, key = str(test_ca.host_cert), str(test_ca.host_key)  # the test CA's cert is also a client cert
    double = FtsDouble(optimizer_interval=1.0, tls=(cert, key), client_ca=str(test_ca.ca_cert)).start()
    try:
        src = endpoint("fts-t-src", door1.root_url_for("/data/fts7/"))
        dst = endpoint("fts-t-dst", door2.root_url_for("/data/fts7/"))
        untrusted = instance(double, "untrusted", bearer_token="", x509_cert=cert, x509_key=key, ca_path="")
        obj = campaign("fts-untrusted", [src], [dst], engine="fts", file_count=4, file_size=10_000,
                       engine_options={"instance": untrusted.pk})  # fmt: skip
        write_sources(door1, "/data/fts7/", obj.source_path, 4, 10_000)
        run = runs.create_run(obj, trigger="command")
        assert RunDriver(run.pk).drive() == RunState.FAILED
        run.refresh_from_db()
        assert run.stop_reason.startswith(
            "Could not pin the link limit on FTS: FTS unreachable: TLS: [SSL: CERTIFICATE_VERIFY_FAILED]"
        )
        assert double.submissions == 0

        trusted = instance(double, "trusted", bearer_token="", x509_cert=cert, x509_key=key,
                           ca_path=str(test_ca.ca_cert))  # fmt: skip
        obj = campaign("fts-trusted", [src], [dst], engine="fts", file_count=4, file_size=10_000,
                       engine_options={"instance": trusted.pk})  # fmt: skip
        run = runs.create_run(obj, trigger="command")
        state = RunDriver(run.pk).drive()
        assert state == RunState.SUCCEEDED, Run.objects.values_list("stop_reason", flat=True).get(pk=run.pk)
    finally:
        double.stop()
    run.refresh_from_db()
    assert run.files_done == 4 and run.snapshot["fts"]["auth"] == "x509"
    # FTS saw the client certificate's subject, in its /K=V notation.
    assert {job["user_dn"] for job in double.jobs.values()} == {"/O=storageops/CN=localhost"}


def test_a_byte_budget_stops_submitting_at_most_one_file_over(xrootd_pair, fts):
    door1, door2 = xrootd_pair
    src = endpoint("fts-b-src", door1.root_url_for("/data/fts8/"))
    dst = endpoint("fts-b-dst", door2.root_url_for("/data/fts8/"))
    obj = campaign("fts-budget", [src], [dst], engine="fts", file_count=10, file_size=10_000, max_bytes=35_000,
                   concurrency_steps=[2],
                   engine_options={"instance": instance(fts, manage_link_limits=False).pk})  # fmt: skip
    write_sources(door1, "/data/fts8/", obj.source_path, 10, 10_000)
    run = runs.create_run(obj, trigger="command")
    # The budget leaves planned files untried: partial.
    assert RunDriver(run.pk).drive() == RunState.PARTIAL
    run.refresh_from_db()
    assert run.stop_reason.startswith("byte budget reached")
    assert (run.files_done, run.files_skipped, len(fts.files)) == (4, 6, 4)

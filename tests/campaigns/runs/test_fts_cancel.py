"""A run cancelled while FTS copies: records that say what FTS did and what the disk holds.

Real FTS (3.14.4) marks a cancelled job's files CANCELED at once and kills their copy processes
seconds later (cancel 00:28:48, kill 00:28:52): a copy that ends in between is whole on its
destination and still CANCELED in FTS's t_file. The FTS double does the same (its `kill_delay`)
and copies for real with gfal2 between two XRootD doors, the destination throttled so that two
4 MB copies take about 2.5 s. Each record is checked against the world: FTS's own record of the
file (the double's), the destination file on disk (size and adler32 read here), and the double's
own clock of when each copy began and ended; then the run page's counts, success rate and its
"Retry failed" count, and the step's window, which stops at the cancel.
"""

from __future__ import annotations

import re
import time
import zlib
from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse

from campaigns import runs
from campaigns.choices import RunState, TransferState
from campaigns.models import Run, Transfer, TransferBucket
from campaigns.results import bucketed, readers
from campaigns.results.measured import bytes_within
from campaigns.runs.engines.copies import CopyOptions
from campaigns.runs.engines.fts import landed
from campaigns.runs.engines.fts.client import parse_time
from campaigns.runs.engines.fts.executor import STOPPING_POLL_SECONDS
from campaigns.runs.engines.fts.store import with_ids
from campaigns.runs.engines.gfal2.client import Gfal2Copier
from campaigns.runs.retrying_failed import retry_indices
from devsite.xrootd_server import XRootDServer, throttle_config
from tests.campaigns.runs.test_fts_engine import TOKEN, instance, run_in_thread, url_path, write_sources
from tests.support.factories import campaign, endpoint
from tests.support.fts_double import FtsDouble

pytestmark = pytest.mark.django_db(transaction=True)
SIZE, COUNT, RATE = 4_000_000, 8, 2_000_000
# A stopping run polls FTS, and looks whether cancelled copies are whole, once a second
# (executor.STOPPING_POLL_SECONDS); one poll late under load is still "within a poll".
POLL = 2 * timedelta(seconds=STOPPING_POLL_SECONDS)


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


@pytest.fixture
def slow_source(tmp_path):
    """A source door throttled: a TPC's data reaches the destination at its rate (a throttled
    destination has a TPC's whole file written at once, then holds the copy's end)."""
    source = XRootDServer("slow-src", tmp_path / "s", workdir=tmp_path / "sr", extra_config=throttle_config(RATE))
    destination = XRootDServer("slow-dst", tmp_path / "d", workdir=tmp_path / "dr")
    try:
        yield source.start(), destination.start()
    finally:
        source.stop()
        destination.stop()


def start_run(fts: FtsDouble, source, destination, name: str, size: int):
    src = endpoint(f"{name}-src", source.root_url_for(f"/data/{name}/"))
    dst = endpoint(f"{name}-dst", destination.root_url_for(f"/data/{name}/"))
    options = {"instance": instance(fts, name=name, files_per_job=2, manage_link_limits=False).pk}
    obj = campaign(
        name, [src], [dst], engine="fts", engine_options=options, file_count=COUNT, file_size=size,
        checksum_mode="both", concurrency_steps=[2], cancel_grace=0, timeout=120,
    )  # fmt: skip
    write_sources(source, f"/data/{name}/", obj.source_path, COUNT, size)
    run = runs.create_run(obj, trigger="command")
    return run, *run_in_thread(run.pk)


def wait_for(condition, what: str, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def on_disk(source, destination, t: Transfer) -> tuple[bool, int | None, str]:
    """(whole, size, adler32) of a transfer's destination file, read from the disk here."""
    path = destination.local_path(url_path(t.destination))
    if not path.exists():
        return False, None, ""
    data = path.read_bytes()
    original = source.local_path(url_path(t.source)).read_bytes()
    found = f"{zlib.adler32(data):08x}"
    return data == original, len(data), found


def table(rows: list[Transfer], files: dict, disk: dict) -> str:
    lines = ["idx state     fts       start    end      dur   bytes    disk"]
    for t in rows:
        f = files.get(t.fts_file_id, {})
        when = lambda v: v.strftime("%H:%M:%S") if v else "-"  # noqa: E731
        lines.append(
            f"{t.index:>3} {t.state:<9} {f.get('file_state', '-'):<9} {when(t.started_at):<8} {when(t.finished_at):<8} "
            f"{t.duration if t.duration is None else round(t.duration, 1)!s:<5} {t.bytes_transferred!s:<8} "
            f"{disk[t.pk]} | {t.error_message}"
        )
    return "\n".join(lines)


def page(client, user, run: Run) -> dict:
    """The run page's counts, success rate and "Retry failed" count, as rendered."""
    client.force_login(user)
    html = client.get(reverse("campaigns:run_detail", args=[run.pk])).content.decode()
    counts = re.search(r'id="file-counts" ([^>]*)>', html).group(1)
    shown = {k: int(v) for k, v in re.findall(r'data-([a-z-]+)="(\d+)"', counts)}
    rate = re.search(r'id="success-rate" data-attempted="(\d+)">([^<]*)<', html)
    retry = re.search(r"Retry failed \((\d+)\)", html)
    return {**shown, "attempted": int(rate.group(1)), "rate": rate.group(2).strip(),
            "retry": int(retry.group(1)) if retry else 0, "html": html}  # fmt: skip


def test_a_cancel_mid_step_records_copies_that_ended_before_their_kill_as_finished(doors, client, operator):
    source, destination = doors
    fts = FtsDouble(optimizer_interval=1.0, token=TOKEN).start()  # kill_delay: 4 s, as observed
    try:
        run, thread, result = start_run(fts, source, destination, "cxa", SIZE)
        states = lambda: [f["file_state"] for f in fts.files.values()]  # noqa: E731
        # The first pair finished, the second copying: cancel 1 s into it, ~1.5 s before it ends.
        wait_for(lambda: states().count("FINISHED") == 2 and states().count("ACTIVE") == 2, ("no second pair", result))
        second = [i for i, f in fts.files.items() if f["file_state"] == "ACTIVE"]
        wait_for(lambda: all(i in fts.copy_began for i in second), "the second pair never began")
        time.sleep(max(1.0 - (datetime.now(UTC) - min(fts.copy_began[i] for i in second)).total_seconds(), 0))
        assert runs.request_cancel(run)
        thread.join(90)
        assert not thread.is_alive() and result.get("state") == RunState.CANCELLED, result
        files = {i: dict(f) for i, f in fts.files.items()}
    finally:
        fts.stop()

    run = Run.objects.get(pk=run.pk)
    rows = list(with_ids(Transfer.objects).filter(run=run).order_by("index"))
    disk = {t.pk: on_disk(source, destination, t) for t in rows}
    report = table(rows, files, disk)
    print(report)
    # What happened, by the double's own clock: both copies of the second pair ended after the
    # cancel and before their kill, and FTS says CANCELED of them.
    for i in second:
        assert fts.cancelled_at[i] < fts.copy_ended[i] < fts.killed_at[i], report
        assert files[i]["file_state"] == "CANCELED" and files[i]["tx_duration"] == 0.0, report

    for t in rows:
        whole, size, adler = disk[t.pk]
        if t.fts_file_id is None:  # never handed to FTS: skipped at the run's end
            assert t.state == TransferState.SKIPPED and t.started_at is None and size is None, report
            continue
        f = files[t.fts_file_id]
        # The record says what the disk holds: whole there <=> a finished copy, with its bytes and checksum.
        assert (t.state == TransferState.SUCCEEDED) is whole, report
        if whole:
            assert t.bytes_transferred == size == SIZE, report
        # And what FTS recorded, where it matters: its file, its start, its state.
        assert t.started_at == parse_time(f["start_time"]), report
        if f["file_state"] == "FINISHED":
            assert t.state == TransferState.SUCCEEDED and t.finished_at == parse_time(f["finish_time"]), report
            assert t.duration == f["tx_duration"] and t.error_message == "", report
        elif f["start_time"] is None:
            assert t.state == TransferState.SKIPPED and t.duration is None and size is None, report
        else:
            # CANCELED by FTS after it started, whole on the disk: a finished copy that says so.
            assert t.state == TransferState.SUCCEEDED and t.complete_on_destination is True, report
            assert t.destination_checksum.lstrip("0") == adler.lstrip("0") and t.error_category == "", report
            assert t.error_message.startswith("FTS recorded it CANCELED (Job canceled by the user); complete on the "
                                              "destination, checksum match (adler32 "), report  # fmt: skip
            kill = parse_time(f["finish_time"])
            # It ended when it was found whole: after the cancel, at the latest a poll after the
            # copy's real end and before FTS's kill, by the double's own clock (FTS's finish time is
            # to the second, so its kill may read up to 1 s early; the throttled door may hold a
            # whole file's copy open a little). Its duration is the copy's, not the 4 s more the
            # kill added.
            ended, killed = fts.copy_ended[t.fts_file_id], fts.killed_at[t.fts_file_id]
            assert run.cancel_requested_at <= t.finished_at < killed, report
            assert t.finished_at <= ended + POLL, report
            assert t.duration == (t.finished_at - t.started_at).total_seconds(), report
            assert t.duration < (killed - t.started_at).total_seconds(), report
            assert t.throughput_bps == SIZE / t.duration, report
            # The note orders what happened: the cancel, then the copy's end, then FTS's kill.
            note = t.error_message
            order = (
                r"The cancel was sent at (\d\d:\d\d:\d\d) UTC, before the copy had ended \(FTS would have recorded it "
                r"FINISHED\), and its file was whole on the destination by (\d\d:\d\d:\d\d) UTC \(found so then\)\. "
                r"It landed in at most ([\d.]+) s from its start at (\d\d:\d\d:\d\d) UTC\. FTS's finish time, "
                r"(\d\d:\d\d:\d\d) UTC, is when it stopped the copy's process\.$"
            )
            found = re.search(order, note)
            assert found, note
            sent, by, ran, began, stopped = found.groups()
            assert sent <= by < stopped and began == f"{t.started_at:%H:%M:%S}" and stopped == f"{kill:%H:%M:%S}", note
            assert float(ran) == pytest.approx(t.duration, abs=0.05), note

    # Counters, buckets and the page follow the records.
    succeeded = [t for t in rows if t.state == TransferState.SUCCEEDED]
    skipped = [t for t in rows if t.state == TransferState.SKIPPED]
    assert (len(succeeded), len(skipped)) == (4, 4), report
    assert (run.files_done, run.files_failed, run.files_cancelled, run.files_skipped) == (4, 0, 0, 4), report
    assert run.bytes_done == 4 * SIZE
    sums = [(b.files_ok, b.moved) for b in TransferBucket.objects.filter(run=run, width=60)]
    assert sum(n for n, _ in sums) == 4 and round(sum(m for _, m in sums)) == 4 * SIZE
    shown = page(client, operator, run)
    assert (shown["ok"], shown["failed"], shown["cancelled"], shown["skipped"], shown["planned"]) == (4, 0, 0, 4, 8)
    assert shown["attempted"] == 4 and shown["rate"] == "100.0 %", shown["rate"]
    # Retry failed: the four never started, not the two FTS called CANCELED that are whole.
    assert shown["retry"] == len(retry_indices(run)) == 4
    assert retry_indices(run) == [t.index for t in skipped]

    # The step's window stops at the cancel: bytes moved after it are left out of its throughput.
    # It starts at its first copy, or where FTS first ran it at its concurrency (measured_from).
    cancel = run.cancel_requested_at.timestamp()
    step = readers.summary(run)["steps"][0]
    first = min(t.started_at.timestamp() for t in succeeded)
    since = datetime.fromisoformat(step["measured_from"]).timestamp() if step.get("measured_from") else first
    before = sum(bytes_within(t.bytes_transferred, t.started_at.timestamp(), t.finished_at.timestamp(), since, cancel)
                 for t in succeeded)  # fmt: skip
    assert max(t.finished_at.timestamp() for t in succeeded) > cancel, report
    assert step["until_cancel"] == run.cancel_requested_at.isoformat(), step
    assert step["window_seconds"] == round(cancel - since, 3), step
    assert step["throughput_bps"] == pytest.approx(before / (cancel - since)), step
    assert step["bytes"] == 4 * SIZE and step["files_ok"] == 4 and step["success_rate"] == 1.0
    # Not the figure of a window to the last copy's end.
    last = max(t.finished_at.timestamp() for t in succeeded)
    assert step["throughput_bps"] != pytest.approx(before / (last - since)), step
    live = bucketed.tables(run)["steps"][0]  # the buckets read the same window, to their 1 s grain
    assert live["until_cancel"] == step["until_cancel"]
    assert live["throughput_bps"] == pytest.approx(step["throughput_bps"], rel=0.1)


def test_a_copy_killed_before_it_is_whole_is_cancelled_and_counted_as_not_succeeded(slow_source, client, operator):
    """A kill soon after the cancel: FTS records the copies' finish at the kill while the doors'
    TPC still writes; found not whole, they are cancelled, and count in the success rate."""
    source, destination = slow_source
    size = 24_000_000  # ~15 s a copy at this door's rate: far from whole when checked
    fts = FtsDouble(optimizer_interval=1.0, token=TOKEN, kill_delay=0.3).start()
    try:
        run, thread, result = start_run(fts, source, destination, "cxb", size)
        wait_for(lambda: [f["file_state"] for f in fts.files.values()].count("ACTIVE") == 2, ("never two", result))
        time.sleep(1.0)
        assert runs.request_cancel(run)
        thread.join(90)
        assert not thread.is_alive() and result.get("state") == RunState.CANCELLED, result
        files = {i: dict(f) for i, f in fts.files.items()}
        run = Run.objects.get(pk=run.pk)
        rows = list(with_ids(Transfer.objects).filter(run=run).order_by("index"))
        disk = {t.pk: on_disk(source, destination, t) for t in rows}  # read at once: the TPCs go on
    finally:
        fts.stop()
    report = table(rows, files, disk)
    print(report)
    started = [t for t in rows if t.started_at]
    assert len(started) == 2, report
    for t in started:
        f = files[t.fts_file_id]
        assert not disk[t.pk][0] and f["file_state"] == "CANCELED", report
        assert t.state == TransferState.CANCELLED and t.complete_on_destination is not True, report
        assert t.finished_at == parse_time(f["finish_time"]) and t.bytes_transferred == 0, report
        assert t.duration == (t.finished_at - t.started_at).total_seconds(), report
        # Its reason, then the cancel after the copy's start, then FTS's stop.
        stopped = (
            r"Job canceled by the user\. The cancel was sent at \d\d:\d\d:\d\d UTC, [\d.]+ s after the copy started at "
            r"\d\d:\d\d:\d\d UTC\. FTS stopped it at \d\d:\d\d:\d\d UTC: it ran [\d.]+ s\. "
            r"Not whole on the destination\.$"
        )
        assert re.match(stopped, t.error_message), t.error_message
    assert (run.files_done, run.files_failed, run.files_cancelled, run.files_skipped) == (0, 0, 2, 6), report
    shown = page(client, operator, run)
    assert (shown["ok"], shown["cancelled"], shown["skipped"]) == (0, 2, 6)
    assert shown["attempted"] == 2 and shown["rate"].startswith("0.0 %"), shown["rate"]
    assert ": 0 ok, 0 failed, 2 cancelled, 6 skipped" in shown["html"]
    assert shown["retry"] == len(retry_indices(run)) == 8
    summary = readers.summary(run)
    assert summary["total"]["files_cancelled"] == 2 and summary["total"]["success_rate"] == 0.0


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
    # What a whole file's check also reads: its checksum and its modification time there.
    before = time.time()
    found = landed.examine_all(storage, checks[:2], "ADLER32")
    assert found[1].checksum.lstrip("0") == known.lstrip("0") and before <= found[1].checked_at <= time.time()
    assert found[2].whole is True and found[2].checksum == found[1].checksum

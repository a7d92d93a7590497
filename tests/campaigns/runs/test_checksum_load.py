"""Checksum-load runs against real XRootD doors: `xrootd.chksum max 2` against `max 8`.

Each request asks for the adler32 of a file no one asked about before (XRootD keeps a
computed checksum in an extended attribute and would answer a repeat from it). The files
are sparse, on tmpfs: reading them costs the door CPU only, so the
test measures the door's checksum limit and not this machine's disk.
"""

from __future__ import annotations

import threading
import zlib

import pytest
from django.db import connection

from campaigns import runs
from campaigns.choices import CampaignKind, RunState
from campaigns.models import Run, Transfer
from campaigns.results import comparison
from campaigns.runs.lifecycle import RunDriver
from devsite.xrootd_server import XRootDServer
from storageops.units import human_duration
from tests.support.factories import campaign, endpoint
from tests.support.sparse import has_tmpfs, sparse_sources, tmpfs_dir

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

SIZE = 128 * 1024 * 1024
STEP_FILES = 8
TIMEOUT = 15  # s: XRootD makes requests over its limit come back ~30 s later


def adler32_of_zeros(size: int) -> str:
    value, block = 1, bytes(1 << 20)
    for _ in range(size // len(block)):
        value = zlib.adler32(block, value)
    return f"{value:08x}"


def drive(run_id: int) -> None:
    try:
        RunDriver(run_id).drive()
    finally:
        connection.close()  # this thread's own connection, or the test database cannot be dropped


@pytest.fixture
def doors():
    if not has_tmpfs():
        pytest.skip("needs a tmpfs at /dev/shm for the sparse files")
    with tmpfs_dir("storageops-cks") as base:
        servers = [
            XRootDServer(f"cks{limit}", base / f"d{limit}", workdir=base / f"r{limit}", chksum_max=limit).start()
            for limit in (2, 8)
        ]
        try:
            yield servers
        finally:
            for server in servers:
                server.stop()


def test_checksum_limit_2_against_8(doors):
    created = []
    for server in doors:
        limit = server.chksum_max
        sparse_sources(server, "cks", 2 * STEP_FILES, SIZE)
        assert f"xrootd.chksum max {limit} adler32" in server.config_path.read_text()
        src = endpoint(f"cks{limit}", server.root_url_for("/data/"))
        obj = campaign(
            f"checksum-max-{limit}", [src], [], kind=CampaignKind.CHECKSUM_LOAD, file_count=2 * STEP_FILES,
            file_size=SIZE, source_path="cks", concurrency_steps=[2, 8], step_files=STEP_FILES, timeout=TIMEOUT,
        )  # fmt: skip
        obj.full_clean()
        created.append(runs.create_run(obj, trigger="command"))
    # Both runs at once: each door is loaded only by its own run, and the test takes one wait.
    drivers = [threading.Thread(target=drive, args=(run.pk,)) for run in created]
    for thread in drivers:
        thread.start()
    for thread in drivers:
        thread.join(timeout=240)
        assert not thread.is_alive()

    max2, max8 = (Run.objects.get(pk=run.pk) for run in created)
    expected = adler32_of_zeros(SIZE)
    for run in (max2, max8):
        # Under load some requests may time out: partial (or failed, if none was answered).
        assert run.state in (RunState.SUCCEEDED, RunState.PARTIAL, RunState.FAILED), run.error
        rows = Transfer.objects.filter(run=run)
        assert rows.count() == 2 * STEP_FILES and not rows.exclude(destination="").exists()
        # Every request is recorded with its latency and the door's answer.
        assert all(t.duration is not None and t.duration > 0 for t in rows)
        assert {t.source_checksum for t in rows if t.state == "succeeded"} == {expected}
        assert [s["files_ok"] + s["files_failed"] for s in run.summary["steps"]] == [STEP_FILES, STEP_FILES]

    for run in (max2, max8):  # the figures docs/benchmarks.md quotes (pytest -s shows them)
        for s in run.summary["steps"]:
            print(
                f"{run.campaign.name} ×{s['concurrency']}: ok {s['files_ok']} failed {s['files_failed']} "
                f"latency p50 {s['latency_p50']:.2f} s p95 {s['latency_p95']:.2f} s errors {s['errors']}"
            )

    def step(run: Run, index: int) -> dict:
        return run.summary["steps"][index]

    # max 8: eight concurrent requests are all computed at once and none times out.
    assert max8.files_failed == 0
    assert step(max8, 1)["latency_p95"] < TIMEOUT
    # max 2: at eight concurrent requests some are held back past the timeout.
    timeouts = Transfer.objects.filter(run=max2, error_category="checksum_timeout")
    assert timeouts.exists() and all(t.duration > TIMEOUT for t in timeouts)
    # Answered late, or never answered and given up at StorageOps' deadline (timeout + 3 s).
    for t in timeouts:
        assert f"past the {TIMEOUT} s timeout" in t.error_message or "deadline" in t.error_message, t.error_message
    assert step(max2, 1)["errors"].get("checksum_timeout", 0) >= 1
    # Latency counts every answered request, the late ones too.
    assert step(max2, 1)["latency_p95"] > TIMEOUT > step(max8, 1)["latency_p95"]

    # The comparison puts the two side by side, step by step.
    table = comparison.compare([max2, max8])
    rows = {r["run"]: r for r in table["runs"]}
    assert rows[max2.pk]["steps"][1]["errors"].get("checksum_timeout", 0) >= 1
    assert rows[max8.pk]["steps"][1]["errors"] == {}
    assert rows[max2.pk]["steps"][1]["latency_p95"] > rows[max8.pk]["steps"][1]["latency_p95"]
    # The verdict of the max 2 run names the timeouts; the max 8 run has none to name.
    assert "checksum timeouts" in rows[max2.pk]["verdict"]["headline"], rows[max2.pk]["verdict"]
    assert "checksum timeouts" not in rows[max8.pk]["verdict"]["headline"]
    # A checksum load is headlined by its latency, taken from its own steps.
    for run in (max2, max8):
        verdict = run.summary["verdict"]
        first, last = step(run, 0), step(run, 1)
        assert [c["p95"] for c in verdict["latency"]] == [first["latency_p95"], last["latency_p95"]]
        assert verdict["headline"].startswith(
            f"Checksum latency p95 {human_duration(first['latency_p95'])} at concurrency 2 → "
            f"{human_duration(last['latency_p95'])} at 8"
        ), verdict["headline"]

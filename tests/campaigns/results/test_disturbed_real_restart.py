"""A real XRootD door restarted in the middle of a real run: the collector sees the restart,
the run is marked disturbed, its report lists the restart, and the trimmed figures leave out
the margin around it (the expected value is computed here from the transfer rows)."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest

from campaigns import runs
from campaigns.models import Run, Transfer
from campaigns.runs.lifecycle import RunDriver
from collectors.models import Event, Host
from collectors.sampling import HostCollector
from devsite.xrootd_server import XRootDServer
from tests.support.factories import campaign, endpoint

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

MARGIN = 3  # seconds each side: the run lasts ~20 s


def test_real_restart_during_a_run(tmp_path, settings):
    settings.STORAGEOPS_DISTURBANCE_MARGIN_SECONDS = MARGIN
    door1 = XRootDServer("rdoor1", tmp_path / "d1", workdir=tmp_path / "r1").start()
    door2 = XRootDServer("rdoor2", tmp_path / "d2", workdir=tmp_path / "r2").start()
    try:
        host = Host.objects.create(
            name="rdoor2", address="127.0.0.1",
            watched_services=[{"name": "xrootd", "pidfile": str(door2.xrootd_pidfile)}],
        )  # fmt: skip
        src = endpoint("rdoor1-root", door1.root_url_for("/data/r/"))
        dst = endpoint("rdoor2-root", door2.root_url_for("/data/r/"))
        dst.hosts.set([host])
        obj = campaign("restart-run", [src], [dst], file_count=16, file_size=500_000, create_sources=True,
                       source_file_count=2, checksum_mode="both", concurrency_steps=[2], retries=2)  # fmt: skip
        run = runs.create_run(obj, trigger="command")
        collector = HostCollector(host)
        collector.tick()
        driver = threading.Thread(target=RunDriver(run.pk).drive)
        driver.start()
        deadline = time.monotonic() + 60
        while Run.objects.get(pk=run.pk).files_done < 6 and time.monotonic() < deadline:
            collector.tick()
            time.sleep(0.5)
        door2.restart()
        collector.tick()
        driver.join(timeout=180)
        assert not driver.is_alive()
    finally:
        door1.stop()
        door2.stop()

    run.refresh_from_db()
    restart = Event.objects.get(host=host, kind="service_restart")
    assert run.started_at <= restart.time <= run.finished_at
    assert run.disturbed
    report = run.summary["disturbance"]
    assert [e["id"] for e in report["events"]] == [restart.pk]

    # Independently: leave out every copy that overlaps [restart - margin, restart + margin],
    # and the excluded seconds that fall inside the remaining copies' span.
    lo, hi = restart.time - timedelta(seconds=MARGIN), restart.time + timedelta(seconds=MARGIN)
    rows = list(Transfer.objects.filter(run=run, state__in=["succeeded", "failed"]).values_list(
        "started_at", "finished_at", "bytes_transferred", "state"))  # fmt: skip
    kept = [r for r in rows if not (r[0] <= hi and r[1] >= lo)]
    assert 0 < len(kept) < len(rows)
    first, last = min(r[0] for r in kept), max(r[1] for r in kept)
    cut = max((min(last, hi) - max(first, lo)).total_seconds(), 0)
    expected = sum(r[2] for r in kept if r[3] == "succeeded") / ((last - first).total_seconds() - cut)
    trimmed = report["trimmed"]
    assert trimmed["total"]["throughput_bps"] == pytest.approx(expected)
    assert trimmed["left_out"]["transfers"] == len(rows) - len(kept)
    assert trimmed["left_out"]["seconds"] == 2 * MARGIN

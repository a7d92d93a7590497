"""A real XRootD door restarted and its config edited show up in the change & restart log."""

from __future__ import annotations

import os
import re
import shutil
import signal
import time
import uuid

import pytest
from django.utils import timezone

from collectors.models import Event, MetricSample
from collectors.probes import procfs
from collectors.sampling import HostCollector
from devsite.xrootd_server import XRootDServer
from tests.support.processes import ManagedProcess


@pytest.fixture
def door(tmp_path):
    server = XRootDServer("watched", tmp_path / "data", workdir=tmp_path / "run").start()
    try:
        yield server
    finally:
        server.stop()


def test_restart_and_config_change_of_a_real_xrootd(make_host, door):
    host = make_host(
        watched_files=[str(door.config_path)],
        watched_services=[{"name": "xrootd-door", "pidfile": str(door.xrootd_pidfile)}],
    )
    collector = HostCollector(host)
    collector.tick()
    collector.tick()
    assert not Event.objects.filter(host=host).exists()  # a steady host logs nothing

    old_pid = door.pid
    door.restart()
    assert door.pid != old_pid
    collector.tick()  # within one interval of the restart
    [restart] = Event.objects.filter(host=host, kind="service_restart")
    assert restart.source == "collector"
    assert "xrootd-door restarted" in restart.summary and str(door.pid) in restart.summary

    config = door.config_path.read_text()
    door.config_path.write_text(config.replace("xrootd.chksum adler32", "xrootd.chksum max 8 adler32"))
    collector.tick()
    [change] = Event.objects.filter(host=host, kind="config_change")
    assert change.summary == f"{door.config_path} changed"
    assert "-xrootd.chksum adler32\n" in change.detail and "+xrootd.chksum max 8 adler32\n" in change.detail
    assert change.detail.startswith("sha256 ")

    collector.tick()
    assert Event.objects.filter(host=host).count() == 2  # each change logged once


def test_a_collector_that_starts_again_notices_a_restart_it_missed(make_host, door):
    host = make_host(watched_services=[{"name": "xrootd-door", "pidfile": str(door.xrootd_pidfile)}])
    HostCollector(host).tick()
    door.restart()
    HostCollector(host).tick()  # a new collector process: nothing in memory
    [event] = Event.objects.filter(host=host, kind="service_restart")
    assert "while the collector was not running" in event.summary


def test_a_stored_boot_time_that_differs_means_a_reboot(make_host):
    host = make_host()
    MetricSample.objects.create(
        host=host, metric="host.boot_time", time=timezone.now(), value=procfs.boot_time() - 3600
    )
    HostCollector(host).tick()
    [event] = Event.objects.filter(host=host, kind="reboot")
    assert "rebooted" in event.summary
    HostCollector(host).tick()
    assert Event.objects.filter(host=host, kind="reboot").count() == 1


def test_a_service_found_by_process_name(make_host, tmp_path, log_dir):
    comm = f"so-{uuid.uuid4().hex[:10]}"  # a name no other process on this machine has
    binary = tmp_path / comm
    shutil.copy("/bin/sleep", binary)

    def start() -> ManagedProcess:
        process = ManagedProcess(comm, [str(binary), "300"], log_dir=log_dir).start()
        # Popen may return before the child's exec has renamed it.
        deadline = time.monotonic() + 5
        while procfs.pids_by_name(comm) != [process.pid] and time.monotonic() < deadline:
            time.sleep(0.02)
        return process

    daemon = start()
    try:
        host = make_host(watched_services=[{"name": "sleeper", "process": comm}])
        collector = HostCollector(host)
        collector.tick()
        first_pid = daemon.pid
        daemon.stop()
        collector.tick()
        daemon = start()
        collector.tick()
        summaries = list(Event.objects.filter(host=host, kind="service_restart").values_list("summary", flat=True))
        assert summaries == [f"sleeper started (pid {daemon.pid})", f"sleeper stopped (was pid {first_pid})"]
        assert MetricSample.objects.filter(host=host, metric="proc.rss_bytes", label="sleeper", value__gt=0).exists()
    finally:
        daemon.stop()


def _stop(pid: int) -> None:
    """SIGSTOP, returning once the kernel shows the process stopped: the signal is delivered
    asynchronously, and on a busy machine a read just after kill() still found it running."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + 10
    while procfs.proc_stat(pid).state not in ("T", "t"):
        assert time.monotonic() < deadline, procfs.proc_stat(pid)
        time.sleep(0.01)


def _answers(door: XRootDServer) -> bool:
    from devsite.xrootd_server import xroot_ping

    return xroot_ping(door.port, timeout=1.0)


def test_a_hung_door_is_one_event_with_its_start_end_and_length(make_host, door):
    """A door SIGSTOPped (alive, its port open, answering nothing) then continued: one event,
    logged when first seen, given its length once it runs again; the door's copies would only
    have waited, and one hang shorter than their deadline left no trace before."""
    host = make_host(watched_services=[{"name": "xrootd-door", "pidfile": str(door.xrootd_pidfile)}])
    collector = HostCollector(host)
    collector.tick()
    _stop(door.pid)
    try:
        assert not _answers(door)  # what the world sees: nothing answers
        collector.tick()
        [hung] = Event.objects.filter(host=host, kind="service_hung")
        assert hung.source == "collector"
        assert hung.summary == f"xrootd-door hung: pid {door.pid} stopped by a signal, answering nothing"
        time.sleep(1.5)
        collector.tick()
        assert Event.objects.filter(host=host, kind="service_hung").count() == 1  # still the same hang
    finally:
        os.kill(door.pid, signal.SIGCONT)
    collector.tick()
    assert _answers(door)
    hung.refresh_from_db()
    length = float(re.search(r"after ([\d.]+) s", hung.detail).group(1))
    assert 1.5 <= length < 30, hung.detail
    assert hung.summary == (
        f"xrootd-door hung for {length:.0f} s: pid {door.pid} stopped by a signal, then running again"
    ), hung.summary
    assert not Event.objects.filter(host=host, kind="service_restart").exists()  # it never restarted
    collector.tick()
    assert Event.objects.filter(host=host).count() == 1


def test_a_hung_door_that_is_killed_ends_its_hang_as_gone(make_host, door):
    host = make_host(watched_services=[{"name": "xrootd-door", "pidfile": str(door.xrootd_pidfile)}])
    collector = HostCollector(host)
    collector.tick()
    pid = door.pid
    _stop(pid)
    collector.tick()
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while procfs.proc_stat(pid) is not None and procfs.proc_stat(pid).state != "Z" and time.monotonic() < deadline:
        time.sleep(0.05)
    door.restart()
    collector.tick()
    [hung] = Event.objects.filter(host=host, kind="service_hung")
    assert hung.summary.endswith(f"pid {pid} stopped by a signal, then gone"), hung.summary
    [restart] = Event.objects.filter(host=host, kind="service_restart")
    assert str(door.pid) in restart.summary

"""A collector worker started by the tests (manage.py collector) samples the real machine."""

from __future__ import annotations

import time

import pytest
from django.core.management import CommandError, call_command

from collectors.models import Event, Host, MetricSample
from collectors.tasks import host_queue, start_host_test
from devsite.xrootd_server import XRootDServer
from tests.support.processes import PYTHON, ROOT, ManagedProcess
from tests.support.workers import child_env


def test_an_unknown_host_is_refused(db):
    with pytest.raises(CommandError, match="Unknown host 'nowhere'"):
        call_command("collector", "--host", "nowhere")


def _wait(predicate, timeout: float, process: ManagedProcess, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if process.returncode is not None:
            break
        time.sleep(0.3)
    raise AssertionError(f"{what} not seen in {timeout}s:\n{process.log_text()[-4000:]}")


@pytest.mark.slow
def test_a_real_collector_worker_samples_watches_and_runs_host_tests(transactional_db, log_dir, tmp_path):
    door = XRootDServer("collected", tmp_path / "data", workdir=tmp_path / "run").start()
    host = Host.objects.create(
        name="collected-door",
        sample_interval=1,
        watched_files=[str(door.config_path)],
        watched_services=[{"name": "xrootd", "pidfile": str(door.xrootd_pidfile)}],
    )
    test_dir = tmp_path / "hosttests"
    argv = [PYTHON, "manage.py", "collector", "--host", host.name, "--loglevel", "info"]
    collector = ManagedProcess("collector", argv, child_env(STORAGEOPS_HOST_TEST_DIR=str(test_dir)), log_dir, cwd=ROOT)
    collector.start()
    try:
        collector.wait_for_log("ready.", timeout=120)  # a worker took over 60 s on a machine loaded twice over
        assert host_queue(host) in collector.log_text()
        samples = MetricSample.objects.filter(host=host)
        _wait(lambda: samples.filter(metric="cpu.percent").exists(), 30, collector, "a cpu.percent sample")
        cpu = samples.filter(metric="cpu.percent").values_list("value", flat=True).first()
        assert 0 <= cpu <= 100
        assert samples.filter(metric="proc.rss_bytes", label="xrootd", value__gt=0).exists()
        host.refresh_from_db()
        assert host.last_seen is not None and host.collector_version

        old_pid = door.pid
        door.restart()
        # One "restarted" event when a sample saw the new daemon straight after the old one, or
        # "stopped (was pid old)" then "started (pid new)" when a sample fell between the two.
        restarts = Event.objects.filter(host=host, kind="service_restart").order_by("time", "pk")
        _wait(lambda: restarts.filter(summary__contains=str(door.pid)).exists(), 15, collector, "the restart")
        said = [event.summary for event in restarts]
        assert str(door.pid) in said[-1] and all(str(old_pid) in text for text in said[:-1]), said

        door.config_path.write_text(door.config_path.read_text() + "xrd.timeout idle 600\n")
        change = _wait(
            lambda: Event.objects.filter(host=host, kind="config_change").first(), 10, collector, "the config change"
        )
        assert "+xrd.timeout idle 600" in change.detail

        # A host test travels through the broker to the collector's own queue.
        result = start_host_test(host, {"tool": "dd", "name": "via-queue", "size": 2 << 20, "rw": "write"})
        assert result.get(timeout=60)["results"]["write_bps"] > 0
        assert samples.filter(metric="hosttest.write_bps", label="via-queue").exists()
        ticks = samples.filter(metric="load1").count()
        assert ticks >= 3  # the loop went on while the test ran
    finally:
        collector.stop()
        door.stop()

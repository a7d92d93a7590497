"""The sampler reads the real machine and stores sane values."""

from __future__ import annotations

import os
import subprocess
import time

from collectors.models import MetricSample
from collectors.probes import procfs
from collectors.sampling import HostCollector
from tests.support.cgroups import cpu_cgroup


def _values(host, metric):
    return list(MetricSample.objects.filter(host=host, metric=metric).values_list("value", flat=True))


def test_two_ticks_store_sane_samples_of_this_machine(make_host, tmp_path):
    pidfile = tmp_path / "pytest.pid"
    pidfile.write_text(f"{os.getpid()}\n")
    host = make_host(watched_services=[{"name": "pytest", "pidfile": str(pidfile)}])
    collector = HostCollector(host)
    first = collector.tick()
    # burn a little CPU so the watched process has something to show
    deadline = time.monotonic() + 0.6
    while time.monotonic() < deadline:
        pass
    second = collector.tick()
    assert first > 0 and second > first  # the second tick adds the rates

    cores = os.cpu_count()
    [cpu] = _values(host, "cpu.percent")
    assert 0 <= cpu <= 100
    for metric in ("load1", "load5", "load15"):
        assert all(v >= 0 for v in _values(host, metric)) and len(_values(host, metric)) == 2
    assert all(v > 0 for v in _values(host, "mem.used"))
    assert all(v >= 0 for v in _values(host, "mem.cached"))
    for metric in ("net.rx_bps", "net.tx_bps", "disk.read_bps", "disk.write_bps", "disk.read_iops", "disk.write_iops"):
        assert all(v >= 0 for v in _values(host, metric)), metric
    if procfs.net_counters():
        assert MetricSample.objects.filter(host=host, metric="net.rx_bps").exclude(label="").exists()
    [proc_cpu] = _values(host, "proc.cpu_percent")
    assert 0 < proc_cpu <= 100 * cores  # we spun for most of the interval
    assert all(v > 10e6 for v in _values(host, "proc.rss_bytes"))  # a Django process is not tiny
    # The cores the watched process may use, as taskset would report them.
    assert _values(host, "proc.cpus_allowed") == [len(os.sched_getaffinity(0))] * 2
    [cores_busy] = _values(host, "proc.cores_busy_percent")
    assert 0 < cores_busy <= 100  # we spun on one of them
    [total] = set(_values(host, "mem.total"))
    assert total > max(_values(host, "mem.used"))
    assert all(0 <= v <= 100 for v in _values(host, "disk.busy_percent"))
    if procfs.disk_counters():
        assert _values(host, "disk.busy_percent")
    host.refresh_from_db()
    assert host.last_seen is not None
    assert MetricSample.objects.filter(host=host, metric="host.boot_time").count() == 1


def test_proc_stat_parses_a_comm_with_spaces_and_parentheses():
    stat = procfs.proc_stat(os.getpid())
    assert stat is not None and stat.pid == os.getpid() and stat.cpu_seconds >= 0 and stat.rss_bytes > 0
    assert procfs.proc_stat(2**22 + 12345) is None


def test_a_process_under_a_cgroup_cpu_quota_may_use_only_that_share_of_a_core(make_host, tmp_path):
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        with cpu_cgroup("quota", quota_cores=0.25) as group:
            group.add(sleeper.pid)
            assert procfs.cpu_quota(sleeper.pid) == ("/" + group.path.name, 0.25)
            pidfile = tmp_path / "sleep.pid"
            pidfile.write_text(f"{sleeper.pid}\n")
            host = make_host(watched_services=[{"name": "sleep", "pidfile": str(pidfile)}])
            HostCollector(host).tick()
            assert _values(host, "proc.cpus_allowed") == [0.25]
            assert _values(host, "proc.cpu_quota_cores") == [0.25]
    finally:
        sleeper.kill()
        sleeper.wait()

"""The sampler reads the real machine and stores sane values."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from campaigns.results.saturation import readings
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


# cpu.stat as the kernels write it: v1 (this machine's, throttled_time in ns) and v2
# (throttled_usec in µs; without a quota anywhere above it, v2 shows usage only).
CPU_STAT_V1 = "nr_periods 412\nnr_throttled 398\nthrottled_time 38652113914\nnr_bursts 0\nburst_time 0\n"
CPU_STAT_V2 = (
    "usage_usec 6020000\nuser_usec 5000000\nsystem_usec 1020000\ncore_sched.force_idle_usec 0\n"
    "nr_periods 600\nnr_throttled 540\nthrottled_usec 52300000\nnr_bursts 0\nburst_usec 0\n"
)
CPU_STAT_V2_NO_QUOTA = "usage_usec 6020000\nuser_usec 5000000\nsystem_usec 1020000\n"


def test_cpu_stat_is_read_in_both_cgroup_versions():
    assert procfs.parse_cpu_stat(CPU_STAT_V1) == procfs.CpuThrottling(412, 398, 38.652113914)
    assert procfs.parse_cpu_stat(CPU_STAT_V2) == procfs.CpuThrottling(600, 540, 52.3)
    assert procfs.parse_cpu_stat(CPU_STAT_V2_NO_QUOTA) is None


def test_a_daemon_held_back_by_its_cgroup_cpu_quota_is_throttled_and_named(make_host, tmp_path):
    """A busy process in a real cgroup allowed 0.015 of a core (the quota the report found):
    the collector samples its throttling from cpu.stat, and the reading names the quota."""
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        with cpu_cgroup("throttled", quota_cores=0.015) as group:
            group.add(burner.pid)
            where, before = procfs.cpu_throttling(burner.pid)
            assert where == str(group.path)
            pidfile = tmp_path / "burner.pid"
            pidfile.write_text(f"{burner.pid}\n")
            host = make_host(name="door2", watched_services=[{"name": "burner", "pidfile": str(pidfile)}])
            collector = HostCollector(host)
            collector.tick()
            time.sleep(1.5)
            collector.tick()
            _, after = procfs.cpu_throttling(burner.pid)
            raw = procfs.parse_cpu_stat((group.path / "cpu.stat").read_text())
    finally:
        burner.kill()
        burner.wait()
    # Against the kernel's own counters, read straight from the file.
    assert raw.throttled >= after.throttled > before.throttled and raw.periods >= after.periods
    [throttled] = _values(host, "proc.cpu_throttled_percent")
    [waited] = _values(host, "proc.cpu_throttled_per_s")
    [used] = _values(host, "proc.cpu_percent")
    # Always wanting CPU, it ran out of its 1.5 ms in (nearly) every 100 ms period it ran in.
    assert throttled >= 80, throttled
    assert 0.5 < waited <= 1.2, waited  # one thread, kept waiting most of each second
    assert used < 5, used  # about 1.5 % of one core: the quota, not the host, stopped it
    print(f"throttled in {throttled:.0f} % of periods, {waited:.2f} s/s waiting, {used:.1f} % of a core")
    means = {(s.metric, s.label): s.value for s in MetricSample.objects.filter(host=host).exclude(metric="cpu.percent")}
    means[("cpu.percent", "")] = 100.0  # the shared host, busy with other work (the report's case)
    [daemon] = [r for r in readings(host, means) if r.resource == "daemon_cpu"]
    assert daemon.title == "CPU quota of burner on door2"
    assert daemon.value >= throttled / 100 and daemon.throttled_percent == throttled
    assert f"throttled in {throttled:.0f} % of its quota periods" in daemon.detail

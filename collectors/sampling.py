"""One collector tick on a storage host: system and process samples, watches, log patterns.

``HostCollector.tick()`` is the whole job and is what tests and the benchmark call;
``CollectorLoop`` runs it every ``Host.sample_interval`` seconds (every second while a run of the
host is live: collectors.live) in a thread of the collector
worker (see docs/collectors.md for why a thread rather than a self-rescheduling task).
Rates come from the difference between this tick's counters and the previous tick's, which
the collector keeps in memory: the first tick stores gauges only.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from django.db import close_old_connections
from django.utils import timezone

from collectors import live
from collectors.events import log_event
from collectors.failing import FailureLog
from collectors.logtail import LogTailer, burst_threshold
from collectors.models import Host, MetricSample
from collectors.probes import procfs
from collectors.probes.rate_limits import rate_limits
from collectors.space import SpaceWatch
from collectors.watches import ServiceState, Watcher, resolve_service

log = logging.getLogger(__name__)


@dataclass
class _Counters:
    at: float  # time.monotonic() of the reading
    cpu: procfs.CpuTimes
    net: dict[str, tuple[int, int]]
    disk: dict[str, tuple[int, int, int, int]]
    busy: dict[str, int]  # device -> io_ticks (ms)
    # service -> {(pid, start): cpu seconds of the process and every child it forked, live or ended}
    procs: dict[str, dict[tuple[int, int], float]]
    cores: dict[int, procfs.CpuTimes]
    affinity: dict[str, set[int]]  # service -> the cores its processes may use
    # service -> (periods, throttled periods, throttled seconds), summed over the cgroups whose
    # CPU quota binds its processes: what says the quota, not the host, held the daemon back.
    throttling: dict[str, tuple[int, int, float]] = field(default_factory=dict)
    # service -> {(pid, start): (rchar, wchar) of the process and its live children}
    io: dict[str, dict[tuple[int, int], tuple[int, int]]] = field(default_factory=dict)
    # service -> {(pid, start): seconds its threads (and its live children's) waited for a CPU}
    waits: dict[str, dict[tuple[int, int], float]] = field(default_factory=dict)


def _rate(new: float, old: float, seconds: float) -> float:
    # A counter that went backwards was reset (device re-added, 32-bit wrap): no rate this time.
    return max(new - old, 0) / seconds


def _trees(stats: list[procfs.ProcStat], parent_of: dict[int, int]) -> dict[tuple[int, int], list]:
    """Each of a service's top processes (those whose parent is not one of them) with every live
    process below it: a door's forked helpers are its work, and their CPU its CPU."""
    listed = {s.pid for s in stats}
    trees = {}
    for top in (s for s in stats if s.ppid not in listed):
        below = [p for p in (procfs.proc_stat(c) for c in procfs.descendants(top.pid, parent_of)) if p is not None]
        trees[(top.pid, top.start_ticks)] = [top, *below]
    return trees


def _waited(tree: list[procfs.ProcStat]) -> float | None:
    waits = [w for w in (procfs.cpu_wait_seconds(p.pid) for p in tree) if w is not None]
    return sum(waits) if waits else None


def _io(tree: list[procfs.ProcStat]) -> tuple[int, int]:
    chars = [c for c in (procfs.io_chars(p.pid) for p in tree) if c is not None]
    return sum(c[0] for c in chars), sum(c[1] for c in chars)


class Sampler:
    """System and per-service metrics; keeps the previous counters for rates."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.previous: _Counters | None = None

    def sample(self, now, services: list[ServiceState]) -> list[MetricSample]:
        host = self.host
        out: list[MetricSample] = []

        def add(metric: str, value: float, label: str = "") -> None:
            out.append(MetricSample(host=host, metric=metric, label=label[:64], time=now, value=float(value)))

        current = _Counters(
            at=time.monotonic(),
            cpu=procfs.cpu_times(),
            net=procfs.net_counters(),
            disk=procfs.disk_counters(),
            busy=procfs.disk_busy_ms(),
            procs={},
            cores=procfs.per_cpu_times(),
            affinity={},
        )
        for name, value in zip(("load1", "load5", "load15"), procfs.load_average(), strict=True):
            add(name, value)
        mem = procfs.memory()
        add("mem.used", mem["used"])
        add("mem.cached", mem["cached"])
        add("mem.total", mem["total"])
        parent_of = procfs.parents() if services else {}
        for state in services:
            stats = [s for s in (procfs.proc_stat(p) for p in state.pids) if s is not None]
            trees = _trees(stats, parent_of)
            current.procs[state.name] = {
                key: sum(p.cpu_seconds + p.children_cpu_seconds for p in tree) for key, tree in trees.items()
            }
            current.io[state.name] = {key: _io(tree) for key, tree in trees.items()}
            current.waits[state.name] = {
                key: wait for key, tree in trees.items() if (wait := _waited(tree)) is not None
            }
            add("proc.rss_bytes", sum(p.rss_bytes for tree in trees.values() for p in tree), state.name)
            # A daemon confined by taskset or a cpuset saturates at 100 % times these cores, not
            # at the machine's: the verdicts need them to call a door's CPU saturated.
            allowed = set().union(*(procfs.cpu_affinity(s.pid) or set() for s in stats))
            if allowed:
                current.affinity[state.name] = allowed
                # A CFS quota (a container's CPU limit) caps it at quota/period cores however
                # many it may run on; processes sharing a cgroup share its quota.
                quotas = [procfs.cpu_quota(s.pid) for s in stats]
                cores: float = len(allowed)
                if quotas and all(quotas):
                    quota = sum(dict(q for q in quotas if q).values())
                    if quota < cores:
                        cores = quota
                        add("proc.cpu_quota_cores", quota, state.name)
                add("proc.cpus_allowed", cores, state.name)
            groups = dict(t for t in (procfs.cpu_throttling(s.pid) for s in stats) if t)
            if groups:
                current.throttling[state.name] = (
                    sum(c.periods for c in groups.values()),
                    sum(c.throttled for c in groups.values()),
                    sum(c.throttled_seconds for c in groups.values()),
                )

        prev = self.previous
        self.previous = current
        if prev is None:
            return out
        seconds = current.at - prev.at
        if seconds <= 0:
            return out
        total = current.cpu.total - prev.cpu.total
        if total > 0:
            # cpu.percent is of the whole machine (0..100), whatever the number of cores.
            add("cpu.percent", min(max((current.cpu.busy - prev.cpu.busy) / total * 100, 0.0), 100.0))
        for iface, (rx, tx) in current.net.items():
            if iface in prev.net:
                add("net.rx_bps", _rate(rx, prev.net[iface][0], seconds), iface)
                add("net.tx_bps", _rate(tx, prev.net[iface][1], seconds), iface)
        for dev, (reads, rbytes, writes, wbytes) in current.disk.items():
            if dev in prev.disk:
                p_reads, p_rbytes, p_writes, p_wbytes = prev.disk[dev]
                add("disk.read_bps", _rate(rbytes, p_rbytes, seconds), dev)
                add("disk.write_bps", _rate(wbytes, p_wbytes, seconds), dev)
                add("disk.read_iops", _rate(reads, p_reads, seconds), dev)
                add("disk.write_iops", _rate(writes, p_writes, seconds), dev)
            if dev in current.busy and dev in prev.busy:
                # io_ticks are milliseconds of I/O: per second of wall time, the busy fraction.
                busy = _rate(current.busy[dev], prev.busy[dev], seconds) / 1000 * 100
                add("disk.busy_percent", min(busy, 100.0), dev)
        for name, procs in current.procs.items():
            before = prev.procs.get(name, {})
            # Only processes alive at both readings count: a new process' whole lifetime
            # CPU is not this interval's.
            used = sum(max(cpu - before[key], 0) for key, cpu in procs.items() if key in before)
            # proc.cpu_percent is of one core, like top: a daemon busy on 3 cores shows 300. It
            # counts the children a door forks (xrdcp --server for a root:// TPC copy) with it.
            add("proc.cpu_percent", used / seconds * 100, name)
        for name, waits in current.waits.items():
            before = prev.waits.get(name, {})
            pairs = [(w, before[key]) for key, w in waits.items() if key in before]
            if pairs:
                # Seconds a second its threads stood in a run queue: more than a little, and a busy
                # host starved the door; near none, and the door had every CPU it asked for.
                add("proc.cpu_wait_per_s", sum(max(w - b, 0.0) for w, b in pairs) / seconds, name)
        for name, chars in current.io.items():
            before = prev.io.get(name, {})
            pairs = [(now_rw, before[key]) for key, now_rw in chars.items() if key in before]
            if pairs:
                read = sum(_rate(r, b[0], seconds) for (r, _), b in pairs)
                written = sum(_rate(w, b[1], seconds) for (_, w), b in pairs)
                # A door's data goes in on one side and out on the other (socket to file, file
                # to socket): the larger direction is the data rate its throttle counts.
                add("proc.io_bps", max(read, written), name)
        for name, allowed in current.affinity.items():
            # How busy the daemon's cores were, whoever kept them busy: a confined daemon whose
            # core is taken by others is as CPU-starved as one that fills it itself.
            busy = sum(current.cores[c].busy - prev.cores[c].busy for c in allowed if c in prev.cores)
            total = sum(current.cores[c].total - prev.cores[c].total for c in allowed if c in prev.cores)
            if total > 0:
                add("proc.cores_busy_percent", min(max(busy / total * 100, 0.0), 100.0), name)
        for name, (periods, throttled, stopped) in current.throttling.items():
            if name not in prev.throttling:
                continue
            was_periods, was_throttled, was_stopped = prev.throttling[name]
            if periods < was_periods or throttled < was_throttled:
                continue  # the cgroup was made anew (a restarted container): its counters began again
            ran = periods - was_periods
            # The share of its quota periods in which the cgroup ran out of quota, and how long its
            # threads were kept waiting per second (more than 1 when several threads were).
            add("proc.cpu_throttled_percent", (throttled - was_throttled) / ran * 100 if ran else 0.0, name)
            add("proc.cpu_throttled_per_s", max(stopped - was_stopped, 0.0) / seconds, name)
        return out


class HostCollector:
    """Everything the collector does once per tick for one host."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.sampler = Sampler(host)
        self.watcher = Watcher(host)
        self.space = SpaceWatch(host)
        self.tailer = LogTailer(host.log_files)

    def tick(self) -> int:
        """Sample, watch and count; store one batch of samples. Returns how many were stored."""
        now = timezone.now()
        services = [resolve_service(spec) for spec in self.host.watched_services]
        samples = self.watcher.check_reboot(now)
        samples += self.sampler.sample(now, services)
        samples += self.watcher.check_services(now, services)
        self.watcher.check_files(now)
        samples += self.space.check(now)
        samples += [
            MetricSample(host=self.host, metric="door.rate_limit_bps", label=name[:64], time=now, value=limit)
            for name, limit in rate_limits(self.watcher.file_texts()).items()
        ]
        samples += self._log_samples(now)
        MetricSample.objects.bulk_create(samples, batch_size=1000)
        Host.objects.filter(pk=self.host.pk).update(last_seen=now)
        return len(samples)

    def _log_samples(self, now) -> list[MetricSample]:
        if not self.tailer.files:
            return []
        result = self.tailer.poll()
        threshold = burst_threshold()
        for name, count in result.counts.items():
            if count >= threshold:
                where = ", ".join(f"{p} ({n})" for p, n in result.files[name].items())
                log_event(
                    "log_burst",
                    f"{count} × {name} in one tick on {self.host.name}",
                    source="collector",
                    host=self.host,
                    time=now,
                    detail=f"{where}\nfirst lines:\n" + "\n".join(result.first_lines.get(name, [])),
                )
        return [
            MetricSample(host=self.host, metric="log.matches", label=name[:64], time=now, value=result.counts[name])
            for name in self.tailer.pattern_names
        ]

    def close(self) -> None:
        self.tailer.close()


def register(host: Host) -> None:
    """Tell the control plane this collector is alive and which code it runs."""
    from storageops.version import full_version

    Host.objects.filter(pk=host.pk).update(last_seen=timezone.now(), collector_version=full_version()[:50])


class CollectorLoop(threading.Thread):
    """Runs ticks every sample_interval seconds until stopped; survives a failing tick."""

    def __init__(self, host_name: str) -> None:
        super().__init__(name=f"collector-{host_name}", daemon=True)
        self.host_name = host_name
        self.stopping = threading.Event()
        self.ticks = 0

    def run(self) -> None:
        collector: HostCollector | None = None
        config_stamp = None
        last_tick: float | None = None
        failures = FailureLog(log, f"collector tick for {self.host_name}")
        while not self.stopping.is_set():
            started = time.monotonic()
            interval = 5.0
            try:
                close_old_connections()
                host = Host.objects.get(name=self.host_name)
                interval = live.interval_for(host)
                # Woken every live interval to ask whether a run began: a run's first step must
                # not wait out the rest of a quiet 5-s interval for its first sample.
                if last_tick is None or started - last_tick >= interval - 0.05:
                    # An operator who edits the host (new files, services, logs) gets a fresh
                    # collector; its first tick is a baseline again.
                    stamp = (host.watched_files, host.watched_services, host.watched_filesystems, host.log_files)
                    if collector is None or stamp != config_stamp:
                        if collector is not None:
                            collector.close()
                        else:
                            register(host)
                        collector, config_stamp = HostCollector(host), stamp
                    last_tick = started
                    collector.tick()
                    self.ticks += 1
                failures.worked()
            except Exception as exc:  # noqa: BLE001 -- logged by FailureLog, with its traceback the first time
                # The loop must outlive a database restart or a bad config: log and go on.
                failures.failed(exc)
            wake = min(interval, live.live_interval())
            until_tick = interval - (time.monotonic() - last_tick) if last_tick is not None else wake
            self.stopping.wait(max(min(wake, until_tick), 0.1))
        if collector is not None:
            collector.close()
        close_old_connections()

    def stop(self) -> None:
        self.stopping.set()

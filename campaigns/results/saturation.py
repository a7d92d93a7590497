"""What the doors' resources did in each step of a run: the saturation a verdict is read from.

For each step's window and each host of the run's working doors, the mean of the collectors'
samples: CPU of all cores, CPU of each watched daemon against the cores it may use (taskset,
cpusets, or its cgroup's CPU quota when that is less), each interface against the host's link
speed, each disk's busy time, memory used; beside them the step's share of requests that
failed the way overloaded doors fail (checksum timeouts, HTTP 5xx). A reading that names a
bottleneck carries its evidence: which host's samples, of which metrics, over which window.

Read from rows already stored (steps, samples), so it can be read again at any time, e.g.
after an operator sets a host's link speed.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timedelta

from django.db.models import Avg, Count, Q

from campaigns.models import Run, RunStep
from campaigns.results.scope import door_hosts, run_hosts
from campaigns.spec import RunSpec
from collectors.models import Host, MetricSample

# A door judged on fewer samples than this in a step is not judged there: one sample is a moment,
# not a step (a verdict was once drawn from a single sample no chart showed).
MIN_SAMPLES = 2
# Requests failing this way are what overloaded doors answer (checksum timeouts, HTTP 5xx).
OVERLOAD_ERRORS = ("checksum_timeout", "http_5xx")
# A door's threads that stood in a run queue this many seconds a second or more were starved of
# CPU by whatever kept the host busy; under it, a busy host did not hold the door back (its
# shares gave it the CPU it asked for), and the host's full CPU is not the door's limit.
STARVED_WAIT = 0.1
# A cgroup throttled in this share of its quota periods or more was held back by its quota:
# it wanted CPU the quota did not give, whatever the host's cores were doing.
THROTTLED_PERCENT = 10.0
_METRICS = (
    "cpu.percent",
    "proc.cpu_percent",
    "proc.cpus_allowed",
    "proc.cpu_quota_cores",
    "proc.cpu_throttled_percent",
    "proc.cpu_throttled_per_s",
    "proc.cores_busy_percent",
    "net.rx_bps",
    "net.tx_bps",
    "disk.busy_percent",
    "mem.used",
    "mem.total",
    "proc.io_bps",
    "door.rate_limit_bps",
    "proc.cpu_wait_per_s",
)


@dataclass(frozen=True)
class Reading:
    """One resource of one door over one step: its mean use as a fraction of its capacity."""

    door: str
    resource: str  # cpu, daemon_cpu, cores, network, disk, memory, rate
    label: str  # daemon, interface or device
    value: float
    detail: str
    # A daemon under a CPU quota: the share of its quota periods in which its cgroup was
    # throttled, and the seconds a second its threads waited for quota (cpu.stat's counters).
    throttled_percent: float | None = None
    throttled_per_s: float | None = None
    # "" for a door of the side that does the work; "source" or "destination" for a door of the
    # other side (a slow source levels a sweep whose destination doors idle).
    side: str = ""
    # False for a full host CPU that did not starve the host's door (its threads hardly waited
    # for a CPU): saturated, but not what held the door back.
    binding: bool = True

    @property
    def quota_bound(self) -> bool:
        """The daemon's cgroup ran out of CPU quota often enough that the quota held it back."""
        return self.resource == "daemon_cpu" and (self.throttled_percent or 0) >= THROTTLED_PERCENT

    @property
    def title(self) -> str:
        names = {
            "cpu": "CPU (all cores)",
            "daemon_cpu": f"CPU quota of {self.label}" if self.quota_bound else f"CPU of {self.label}",
            "cores": f"CPU of the cores {self.label} may use",
            "network": f"network {self.label}",
            "disk": f"disk {self.label} busy",
            "memory": "memory",
            "rate": f"data-rate limit of {self.label}",
        }
        return f"{names[self.resource]} on {self.door}"


def readings(host: Host, means: dict[tuple[str, str], float]) -> list[Reading]:
    """A host's resources as fractions of their capacity, from its mean samples over a window."""
    out: list[Reading] = []
    door = host.name
    # A daemon held by its own CPU quota waits for its quota, not for the host's cores: its wait
    # says nothing of the host (its quota reading names that limit).
    waits = {label: v for (metric, label), v in means.items() if metric == "proc.cpu_wait_per_s"}
    free = {label: v for label, v in waits.items() if not _quota_bound(label, means)}
    if (cpu := means.get(("cpu.percent", ""))) is not None:
        detail, binding = f"{cpu:.0f} % of all cores", True
        if free:
            waited = max(free.values())
            binding = waited >= STARVED_WAIT
            detail += f"; its door waited {waited:.2f} s a second for a CPU" + ("" if binding else ": not starved")
        elif waits:
            binding = False
            detail += "; its door waited for its own CPU quota, not for the host's cores"
        out.append(Reading(door, "cpu", "", cpu / 100, detail, binding=binding))
    for (metric, label), value in sorted(means.items()):
        if metric == "proc.cpu_percent":
            cores = means.get(("proc.cpus_allowed", label))
            if cores:
                out.extend(_daemon_cpu(door, label, value, cores, means))
        elif metric == "disk.busy_percent":
            out.append(Reading(door, "disk", label, value / 100, f"busy {value:.0f} % of the time"))
    if host.link_speed_bps:
        interfaces = {label for metric, label in means if metric in ("net.rx_bps", "net.tx_bps")}
        for iface in sorted(interfaces):
            rate = max(means.get(("net.rx_bps", iface), 0.0), means.get(("net.tx_bps", iface), 0.0))
            out.append(
                Reading(
                    door,
                    "network",
                    iface,
                    rate * 8 / host.link_speed_bps,
                    f"{rate * 8 / 1e9:.2f} of {host.link_speed_bps / 1e9:g} Gbit/s",
                )
            )
    out.extend(_rate_limit(door, means))
    used, total = means.get(("mem.used", "")), means.get(("mem.total", ""))
    if used is not None and total:
        out.append(Reading(door, "memory", "", used / total, f"{used / 2**30:.1f} of {total / 2**30:.1f} GiB used"))
    return out


def _quota_bound(label: str, means: dict[tuple[str, str], float]) -> bool:
    throttled = means.get(("proc.cpu_throttled_percent", label))
    return means.get(("proc.cpu_quota_cores", label)) is not None and (throttled or 0) >= THROTTLED_PERCENT


def _rate_limit(door: str, means: dict[tuple[str, str], float]) -> list[Reading]:
    """The door's data rate (its daemons' bytes in or out a second, from /proc/<pid>/io) against
    the lowest data-rate limit its configuration sets (collectors.probes.rate_limits): a door
    held by its throttle levels off with its CPU idle, and only this names the cap."""
    limits = {label: v for (metric, label), v in means.items() if metric == "door.rate_limit_bps" and v > 0}
    rates = {label: v for (metric, label), v in means.items() if metric == "proc.io_bps"}
    if not limits or not rates:
        return []
    config, limit = min(limits.items(), key=lambda item: item[1])
    daemon, rate = max(rates.items(), key=lambda item: item[1])
    detail = f"{rate / 1e6:.1f} MB/s through {daemon} against the {limit / 1e6:g} MB/s its {config} allows"
    return [Reading(door, "rate", daemon, rate / limit, detail)]


def _daemon_cpu(door: str, label: str, value: float, cores: float, means: dict) -> list[Reading]:
    """The daemon's own use of the cores it may use, and, apart, how busy those cores were
    whoever kept them busy: a host filled by other work starves the daemon too, but the verdict
    must say it was the host, not the daemon ("7 % of 2 cores" once called the daemon full)."""
    own = value / (100 * cores)
    quota = means.get(("proc.cpu_quota_cores", label))
    detail = f"{value:.0f} % of {cores:.3g} core(s)" + (" (its cgroup's CPU quota)" if quota else "")
    throttled = means.get(("proc.cpu_throttled_percent", label))
    waited = means.get(("proc.cpu_throttled_per_s", label))
    if quota and throttled is not None and throttled >= THROTTLED_PERCENT:
        # The counters say the quota stopped it: as full as the share of periods it was stopped
        # in, even where its mean use reads lower (a daemon that waits for quota uses less).
        own = max(own, throttled / 100)
        detail = (
            f"throttled in {throttled:.0f} % of its quota periods, {waited or 0:.2f} s a second kept waiting "
            f"(cpu.stat); {value:.1f} % of one core used of a quota of {quota:.3g} core(s)"
        )
    found = [Reading(door, "daemon_cpu", label, own, detail, throttled, waited)]
    busy = means.get(("proc.cores_busy_percent", label))
    # Under a CPU quota the quota is the daemon's limit, however busy the cores are.
    if busy is not None and not quota:
        share = value / cores
        others = share < busy / 2
        who = (
            f"{label} itself {share:.0f} %: the host is busy with other work"
            if others
            else (f"most of it {label}'s own ({share:.0f} %)")
        )
        waited = means.get(("proc.cpu_wait_per_s", label))
        binding = not others or waited is None or waited >= STARVED_WAIT
        if others and waited is not None:
            who += f"; {label} waited {waited:.2f} s a second for a CPU" + ("" if binding else ": not starved")
        found.append(Reading(door, "cores", label, busy / 100, f"{busy:.0f} % busy; {who}", binding=binding))
    return found


def _step_windows(run: Run, end: datetime) -> list[tuple[RunStep, datetime]]:
    return [(s, s.ended_at or end) for s in run.steps.order_by("index")]


def saturation(run: Run, summary: dict, end: datetime) -> tuple[list[dict], dict[int, list[Reading]], int]:
    """Per step: each door's readings and the overload error rate; also the samples used."""
    windows = _step_windows(run, end)
    spec = RunSpec.of(run)
    doors = door_hosts(run)
    far_side = "source" if spec.door_side == "destination" else "destination"
    others = [h for h in run_hosts(run) if h not in doors]
    hosts = [*doors, *others]
    per_step: dict[int, list[Reading]] = {}
    table: list[dict] = []
    used = 0
    errors = {s["step"]: s for s in summary.get("steps", [])}
    for step, stop in windows:
        # Averaged by the database, one query a step: a weeks-long run of many hosts has
        # millions of samples, and the (host, metric, time) index serves exactly this.
        # A sample stamped t covers the interval before t: it belongs to the step it ends in,
        # and the first one of a step also covers time before the step began (the idle door
        # before a run's first step), so it is left out when the step holds another one.
        means: dict[int, dict[tuple[str, str], float]] = defaultdict(dict)
        counts: dict[int, int] = defaultdict(int)  # host -> its most-sampled metric's samples
        if hosts:
            within = Q()
            for host in hosts:
                interval = timedelta(seconds=host.sample_interval)
                begin = step.started_at + interval if stop - step.started_at >= 2 * interval else step.started_at
                within |= Q(host=host, time__gte=begin)
            rows = (
                MetricSample.objects.filter(within, metric__in=_METRICS, time__gt=step.started_at, time__lte=stop)
                .values_list("host_id", "metric", "label")
                .annotate(mean=Avg("value"), n=Count("id"))
                .order_by()
            )
            for host_id, metric, label, mean, n in rows:
                means[host_id][(metric, label)] = mean
                counts[host_id] = max(counts[host_id], n)
                used += n
        thin = {host.name: counts[host.pk] for host in doors if 0 < counts[host.pk] < MIN_SAMPLES}
        found = [r for host in doors if host.name not in thin for r in readings(host, means[host.pk])]
        found += [
            replace(r, side=far_side)
            for host in others
            if counts[host.pk] >= MIN_SAMPLES
            for r in readings(host, means[host.pk])
        ]
        row = errors.get(step.index, {})
        attempted = row.get("files_ok", 0) + row.get("files_failed", 0)
        overload = sum(row.get("errors", {}).get(c, 0) for c in OVERLOAD_ERRORS)
        per_step[step.index] = found
        table.append(
            {
                "step": step.index,
                "concurrency": spec.concurrency_of(step.index),
                # What each reading rests on: the step's window and each door's samples in it.
                "window": [step.started_at.isoformat(), stop.isoformat()],
                "samples": {host.name: counts[host.pk] for host in hosts if counts[host.pk]},
                "readings": [{**asdict(r), "title": r.title} for r in sorted(found, key=lambda r: -r.value)],
                "overload_error_rate": overload / attempted if attempted else None,
                "not_enough_samples": thin,  # door -> the samples it had: not judged in this step
                # What a thin step would have needed: each door's sampling interval, the step's length.
                "sample_interval": {host.name: host.sample_interval for host in hosts if host.name in thin},
                "seconds": (stop - step.started_at).total_seconds(),
            }
        )
    return table, per_step, used


# -- evidence -------------------------------------------------------------------------------
# The metrics a resource's reading is computed from, as the collectors store them.
EVIDENCE_METRICS = {
    "cpu": ["cpu.percent", "proc.cpu_wait_per_s"],
    "daemon_cpu": [
        "proc.cpu_percent",
        "proc.cpus_allowed",
        "proc.cpu_quota_cores",
        "proc.cpu_throttled_percent",
        "proc.cpu_throttled_per_s",
    ],
    "cores": ["proc.cores_busy_percent", "proc.cpu_percent", "proc.cpu_wait_per_s"],
    "network": ["net.rx_bps", "net.tx_bps"],
    "disk": ["disk.busy_percent"],
    "memory": ["mem.used", "mem.total"],
    "rate": ["proc.io_bps", "door.rate_limit_bps"],
}


def evidence(reading: Reading, step: dict) -> dict:
    """Where a bottleneck can be seen: which host's samples, of which metrics, over which window
    (the run page links it to the host's charts over exactly that window)."""
    return {
        "door": reading.door,
        "host_id": Host.objects.filter(name=reading.door).values_list("pk", flat=True).first(),
        "metrics": EVIDENCE_METRICS[reading.resource],
        "label": reading.label,
        "from": step["window"][0],
        "to": step["window"][1],
        "samples": step["samples"].get(reading.door, 0),
        # Under a binding quota, the throttling counters' means over the window are the proof.
        **(
            {"throttled_percent": reading.throttled_percent, "throttled_per_s": reading.throttled_per_s}
            if reading.quota_bound
            else {}
        ),
    }

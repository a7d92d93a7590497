"""The one-line answer to a sweep: where the knee is, what saturated, how many doors it takes.

- Knee: the peak aggregate throughput of a stepped run and the smallest concurrency that
  reaches 95 % of it; when that is the largest concurrency tried, the curve is "still rising
  at the last step" and the knee lies beyond the sweep.
- Saturation: for each step's window and each host of the run's endpoints, the mean of the
  collectors' samples: CPU of all cores, CPU of each watched daemon against the cores it may
  use (taskset, cpusets, or its cgroup's CPU quota when that is less), each interface against
  the host's link speed, each disk's busy time, memory used; beside them the step's share of
  requests that failed the way overloaded doors fail (checksum timeouts, HTTP 5xx). The
  bottleneck is the first resource to reach 90 % at or before the knee (the highest one, if
  several reach it in the same step).
- Capacity: per-door throughput at the knee, and how many such doors a target rate needs.

Everything is computed from rows already stored (transfers, steps, samples), so a verdict can
be recomputed at any time, e.g. after an operator sets a host's link speed.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Avg, Count, Q
from django.utils import timezone

from campaigns import sweeps
from campaigns.choices import CampaignKind
from campaigns.models import Run, RunStep
from campaigns.results.evidence import evidence
from campaigns.results.latency import latency_curve, latency_sentence
from campaigns.results.scope import door_hosts
from campaigns.spec import RunSpec
from collectors.models import Host, MetricSample
from storageops.units import human_rate as format_rate
from storageops.units import si

KNEE_FRACTION = 0.95
# Two runs of the same step on shared storage differ by several per cent (a flat, CPU-bound
# curve read 638, 632, 635, 674 MB/s here): a last step less than this far above every earlier
# step has not shown a rise, and the knee is judged against the best earlier step instead.
RISE_BEYOND_NOISE = 0.10
SATURATED = 0.90
# A door judged on fewer samples than this in a step is not judged there: one sample is a moment,
# not a step (a verdict was once drawn from a single sample no chart showed).
MIN_SAMPLES = 2
# A step where this share of requests fails with checksum timeouts or HTTP 5xx is overloaded
# even if no sampled resource is: the door's own limits (xrootd.chksum max, thread pools).
OVERLOAD_ERROR_RATE = 0.05
OVERLOAD_ERRORS = ("checksum_timeout", "http_5xx")
_METRICS = (
    "cpu.percent",
    "proc.cpu_percent",
    "proc.cpus_allowed",
    "proc.cpu_quota_cores",
    "proc.cores_busy_percent",
    "net.rx_bps",
    "net.tx_bps",
    "disk.busy_percent",
    "mem.used",
    "mem.total",
)


@dataclass(frozen=True)
class Reading:
    """One resource of one door over one step: its mean use as a fraction of its capacity."""

    door: str
    resource: str  # cpu, daemon_cpu, network, disk, memory
    label: str  # daemon, interface or device
    value: float
    detail: str

    @property
    def title(self) -> str:
        names = {
            "cpu": "CPU (all cores)",
            "daemon_cpu": f"CPU of {self.label}",
            "cores": f"CPU of the cores {self.label} may use",
            "network": f"network {self.label}",
            "disk": f"disk {self.label} busy",
            "memory": "memory",
        }
        return f"{names[self.resource]} on {self.door}"


# Between resources equally saturated (within TIE), the narrower one is the better diagnosis: a
# machine whose CPU is full because its daemon fills the cores it may use is the daemon's CPU.
TIE = 0.02
_SPECIFIC = ("cpu", "memory", "disk", "network", "cores", "daemon_cpu")
_CPU_WITHIN = ("cores", "daemon_cpu")  # parts of a host's CPU: the cores it may use, its daemon's share


# -- knee -----------------------------------------------------------------------------------
def knee(steps: list[dict], axes: list[str] | tuple[str, ...] = ()) -> dict:
    """Peak and knee of a concurrency curve given as the step table of a run summary.

    In a sweep over other knobs too (`axes`: streams, TCP buffer, mode), the curve is the
    concurrency row of the best step's setting: a knee read across rows would mix two curves."""
    scored = [s for s in steps if s.get("throughput_bps") and s.get("concurrency")]
    if not scored:
        return {"status": "no_data", "peak": None, "knee": None}
    peak = max(scored, key=lambda s: s["throughput_bps"])
    if axes:
        scored = [s for s in scored if all(s.get(a) == peak.get(a) for a in axes)]
    concurrencies = {s["concurrency"] for s in scored}
    reference = peak
    earlier = [s for s in scored if s["concurrency"] < max(concurrencies)]
    if earlier and peak["concurrency"] == max(concurrencies):
        best_earlier = max(earlier, key=lambda s: s["throughput_bps"])
        if peak["throughput_bps"] <= (1 + RISE_BEYOND_NOISE) * best_earlier["throughput_bps"]:
            reference = best_earlier
    reaching = [s for s in scored if s["throughput_bps"] >= KNEE_FRACTION * reference["throughput_bps"]]
    at = min(reaching, key=lambda s: (s["concurrency"], s["step"]))
    if len(concurrencies) < 2:
        status = "single_step"
    elif at["concurrency"] == max(concurrencies):
        status = "still_rising"
    else:
        status = "levelled"

    def point(s: dict) -> dict:
        return {"step": s["step"], "concurrency": s["concurrency"], "throughput_bps": s["throughput_bps"],
                **{a: s.get(a) for a in axes}}  # fmt: skip

    return {"status": status, "peak": point(peak), "knee": point(at)}


# -- saturation -----------------------------------------------------------------------------
def readings(host: Host, means: dict[tuple[str, str], float]) -> list[Reading]:
    """A host's resources as fractions of their capacity, from its mean samples over a window."""
    out: list[Reading] = []
    door = host.name
    if (cpu := means.get(("cpu.percent", ""))) is not None:
        out.append(Reading(door, "cpu", "", cpu / 100, f"{cpu:.0f} % of all cores"))
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
    used, total = means.get(("mem.used", "")), means.get(("mem.total", ""))
    if used is not None and total:
        out.append(Reading(door, "memory", "", used / total, f"{used / 2**30:.1f} of {total / 2**30:.1f} GiB used"))
    return out


def _daemon_cpu(door: str, label: str, value: float, cores: float, means: dict) -> list[Reading]:
    """The daemon's own use of the cores it may use, and, apart, how busy those cores were
    whoever kept them busy: a host filled by other work starves the daemon too, but the verdict
    must say it was the host, not the daemon (issue 17: "7 % of 2 cores" called the daemon full)."""
    own = value / (100 * cores)
    quota = means.get(("proc.cpu_quota_cores", label))
    detail = f"{value:.0f} % of {cores:.3g} core(s)" + (" (its cgroup's CPU quota)" if quota else "")
    found = [Reading(door, "daemon_cpu", label, own, detail)]
    busy = means.get(("proc.cores_busy_percent", label))
    # Under a CPU quota the quota is the daemon's limit, however busy the cores are.
    if busy is not None and not quota:
        share = value / cores
        who = (
            f"{label} itself {share:.0f} %: the host is busy with other work"
            if share < busy / 2
            else f"most of it {label}'s own ({share:.0f} %)"
        )
        found.append(Reading(door, "cores", label, busy / 100, f"{busy:.0f} % busy; {who}"))
    return found


def _step_windows(run: Run, end: datetime) -> list[tuple[RunStep, datetime]]:
    return [(s, s.ended_at or end) for s in run.steps.order_by("index")]


def saturation(run: Run, summary: dict, end: datetime) -> tuple[list[dict], dict[int, list[Reading]], int]:
    """Per step: each door's readings and the overload error rate; also the samples used."""
    windows = _step_windows(run, end)
    hosts = door_hosts(run)
    spec = RunSpec.of(run)
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
        thin = {host.name: counts[host.pk] for host in hosts if 0 < counts[host.pk] < MIN_SAMPLES}
        found = [r for host in hosts if host.name not in thin for r in readings(host, means[host.pk])]
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
            }
        )
    return table, per_step, used


# -- capacity -------------------------------------------------------------------------------
def target_rate_bps(run: Run) -> int:
    """bit/s: the campaign's target rate, else the site's (STORAGEOPS_TARGET_RATE_BPS), else 0."""
    return RunSpec.of(run).target_rate_bps or settings.STORAGEOPS_TARGET_RATE_BPS


def capacity(knee_point: dict | None, doors: list[str], target_bps: int, still_rising: bool) -> dict | None:
    """How many doors like these a target rate needs, from the per-door throughput at the knee."""
    if not knee_point or not doors:
        return None
    per_door = knee_point["throughput_bps"] / len(doors)
    assumptions = [
        f"per-door throughput at the knee = the knee step's aggregate {format_rate(knee_point['throughput_bps'])} "
        f"spread evenly over the {len(doors)} door(s) that did the work ({', '.join(doors)})",
        "throughput grows linearly with the number of doors, each new door like these ones",
        "everything else (site link, network path, backend storage, the other side) keeps up",
    ]
    if still_rising:
        assumptions.append("the curve was still rising: a door can do more, so the count is an upper bound")
    result = {
        "per_door_bps": per_door,
        "doors_measured": len(doors),
        "target_rate_bits": target_bps or None,
        "target_rate_text": si(target_bps, "bit/s") if target_bps else "",
        "doors_needed": math.ceil(target_bps / 8 / per_door) if target_bps and per_door > 0 else None,
        # A curve still rising has not shown what a door can do: the count is at most this.
        "bound": "at most" if still_rising else "",
        "assumptions": assumptions,
    }
    if not target_bps:
        result["note"] = "No target rate: set the campaign's target rate or STORAGEOPS_TARGET_RATE_BPS."
    return result


def _door_count(summary: dict) -> list[str]:
    # A door entry is one endpoint's hosts joined by commas (or its URL's host:port).
    return sorted({name for entry in summary.get("doors", {}) for name in entry.split(",") if name})


# -- the verdict ----------------------------------------------------------------------------
def run_verdict(run: Run, summary: dict, end: datetime | None = None) -> dict:
    """Knee, saturation per step and door, bottleneck, capacity, and a headline sentence."""
    end = end or run.finished_at or timezone.now()
    curve = knee(summary.get("steps", []), RunSpec.of(run).swept_axes)
    table, per_step, used = saturation(run, summary, end)
    knee_point = curve["knee"]
    bottleneck = None
    overloaded = None
    for step in table:
        where = {"step": step["step"], "concurrency": step["concurrency"]}
        hot = [r for r in per_step[step["step"]] if r.value >= SATURATED]
        if knee_point and bottleneck is None and hot and step["step"] <= knee_point["step"]:
            fullest = max(r.value for r in hot)
            top = max((r for r in hot if r.value >= fullest - TIE), key=lambda r: _SPECIFIC.index(r.resource))
            # A daemon's CPU is part of its host's: with both saturated, the narrower names the limit.
            # A host kept busy by other work read 100 % beside a door at 97 % of its quota (run 24).
            nested = [r for r in hot if r.door == top.door and r.resource in _CPU_WITHIN]
            if top.resource == "cpu" and nested:
                top = max(nested, key=lambda r: _SPECIFIC.index(r.resource))
            bottleneck = {**asdict(top), "title": top.title, **where, "evidence": evidence(top, step)}
        # Overload errors are worth saying wherever they start: past the knee they say why
        # more concurrency did not help.
        rate = step["overload_error_rate"]
        if overloaded is None and rate is not None and rate >= OVERLOAD_ERROR_RATE:
            overloaded = {**where, "rate": rate}
    doors = _door_count(summary)
    verdict = {
        "status": curve["status"],
        "peak": curve["peak"],
        "knee": knee_point,
        "bottleneck": bottleneck,
        "overload_errors": overloaded,
        "samples_used": used,
        "saturation": table,
        "capacity": capacity(knee_point, doors, target_rate_bps(run), curve["status"] == "still_rising"),
        "thresholds": {"knee": KNEE_FRACTION, "saturated": SATURATED, "overload_error_rate": OVERLOAD_ERROR_RATE},
        "computed_at": timezone.now().isoformat(),
    }
    if RunSpec.of(run).kind == CampaignKind.CHECKSUM_LOAD:
        verdict["latency"] = latency_curve(summary.get("steps", []))
    verdict["headline"] = headline(verdict)
    return verdict


def _thin(v: dict) -> str:
    """The steps at or before the knee whose doors had too few samples to be judged."""
    knee_step = v["knee"]["step"] if v["knee"] else None
    return "; ".join(
        f"{door}: {n} in the step at concurrency {row['concurrency']}"
        for row in v["saturation"]
        if knee_step is None or row["step"] <= knee_step
        for door, n in sorted(row.get("not_enough_samples", {}).items())
    )


def headline(v: dict) -> str:
    """The verdict in one line."""
    if v["status"] == "no_data":
        return "No step moved any data: there is no curve to read."
    knee_point, peak, b = v["knee"], v["peak"], v["bottleneck"]
    if v["status"] == "single_step":
        rate = format_rate(peak["throughput_bps"])
        curve = f"One concurrency only ({knee_point['concurrency']}, {rate}): no knee to find."
    elif v["status"] == "still_rising":
        curve = (
            f"Still rising at the last step (concurrency {knee_point['concurrency']}, "
            f"{format_rate(knee_point['throughput_bps'])}): the knee lies beyond this sweep."
        )
    else:
        curve = (
            f"Knee at concurrency {knee_point['concurrency']} ({format_rate(knee_point['throughput_bps'])}; "
            f"peak {format_rate(peak['throughput_bps'])} at {peak['concurrency']})."
        )
    setting = sweeps.setting_text(knee_point)
    if setting:
        # A sweep over more than concurrency: the curve read is the best setting's.
        curve = f"{curve[:-1]}, with {setting} (the best setting's curve)."
    o = v["overload_errors"]
    errors = (
        f" From concurrency {o['concurrency']}, {o['rate']:.0%} of requests failed with checksum timeouts "
        "or HTTP 5xx: the doors' own limits (e.g. xrootd.chksum max) or overload."
        if o
        else ""
    )
    if b and v["status"] == "still_rising":
        # Saturated yet still gaining: the next steps will tell whether it holds the curve back.
        cause = f" {b['title']} already at {b['value']:.0%} ({b['detail']}) from concurrency {b['concurrency']}."
        cause += errors
    elif b:
        cause = f" Bottleneck: {b['title']} at {b['value']:.0%} ({b['detail']}) from concurrency {b['concurrency']}."
        cause += errors
    elif o:
        cause = " No sampled resource saturated." + errors
    elif not v["samples_used"]:
        cause = " Saturation unknown: no collector samples of the run's hosts in its steps."
    elif thin := _thin(v):
        cause = f" Saturation unknown where it matters: not enough samples ({thin})."
    elif v["status"] == "still_rising":
        cause = " Nothing saturated yet."
    else:
        cause = (
            " Nothing saturated at or before the knee: the limit is elsewhere "
            "(the source, the network path, or the concurrency itself)."
        )
    cap = v["capacity"]
    if cap and cap.get("doors_needed"):
        bound = "At most " if cap.get("bound") else ""
        cause += (
            f" {bound}{cap['doors_needed']} door(s) like these for {cap['target_rate_bits'] / 1e9:g} Gbit/s "
            f"at {format_rate(cap['per_door_bps'])} per door"
            + (" (the curve was still rising: a door can do more)." if bound else ".")
        )
    # A checksum load is read by its latency first; the bytes the door read come after.
    lead = latency_sentence(v["latency"]) if v.get("latency") else ""
    return lead + curve + cause

"""The one-line answer to a sweep: where the knee is, what saturated, how many doors it takes.

- Knee: the peak aggregate throughput of a stepped run and the smallest concurrency that
  reaches 95 % of it; when that is the largest concurrency tried, the curve is "still rising
  at the last step" and the knee lies beyond the sweep.
- Bottleneck: of the doors' readings per step (campaigns.results.saturation), the first
  resource to reach 90 % at or before the knee (the highest one, if several reach it in the
  same step); beside it the step where overload errors (checksum timeouts, HTTP 5xx) begin.
- Capacity: per-door throughput at the knee, and how many such doors a target rate needs.
- Latency: a checksum load is read by its answers' latency per step first.

Everything is computed from rows already stored (transfers, steps, samples), so a verdict can
be recomputed at any time, e.g. after an operator sets a host's link speed.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from datetime import datetime

from django.conf import settings
from django.utils import timezone

from campaigns import sweeps
from campaigns.choices import CampaignKind
from campaigns.models import Run
from campaigns.results.saturation import evidence, saturation
from campaigns.spec import RunSpec
from storageops.units import human_duration, si
from storageops.units import human_rate as format_rate

KNEE_FRACTION = 0.95
# Two runs of the same step on shared storage differ by several per cent (a flat, CPU-bound
# curve read 638, 632, 635, 674 MB/s here): a last step less than this far above every earlier
# step has not shown a rise, and the knee is judged against the best earlier step instead.
RISE_BEYOND_NOISE = 0.10
SATURATED = 0.90
# A step where this share of requests fails with checksum timeouts or HTTP 5xx is overloaded
# even if no sampled resource is: the door's own limits (xrootd.chksum max, thread pools).
OVERLOAD_ERROR_RATE = 0.05

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


# -- latency --------------------------------------------------------------------------------
def latency_curve(steps: list[dict]) -> list[dict]:
    """Per step: the latency of every answered request (p50, p95) and the answers a second.

    What a checksum-load sweep is read by: BNL's and Lancaster's doors failed when checksum
    answers came too late, not when too few bytes were read."""
    out = []
    for s in steps:
        if s.get("latency_p95") is None:
            continue
        answered = s.get("files_ok", 0) + s.get("files_failed", 0)
        window = s.get("window_seconds") or 0
        out.append(
            {
                "step": s["step"],
                "concurrency": s.get("concurrency"),
                "p50": s.get("latency_p50"),
                "p95": s["latency_p95"],
                "answers_per_s": answered / window if window else None,
            }
        )
    return out


def latency_sentence(curve: list[dict]) -> str:
    first, last = curve[0], curve[-1]
    best = max((c["answers_per_s"] or 0 for c in curve), default=0)
    if first is last:
        text = f"Checksum latency p95 {human_duration(first['p95'])} (p50 {human_duration(first['p50'])})"
        text += f" at concurrency {first['concurrency']}"
    else:
        text = (
            f"Checksum latency p95 {human_duration(first['p95'])} at concurrency {first['concurrency']} → "
            f"{human_duration(last['p95'])} at {last['concurrency']} "
            f"(p50 {human_duration(first['p50'])} → {human_duration(last['p50'])})"
        )
    return text + (f"; at best {best:.1f} answers/s. " if best else ". ")


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

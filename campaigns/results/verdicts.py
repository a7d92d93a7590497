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
from campaigns.results import concurrency, engine_notes
from campaigns.results.saturation import MIN_SAMPLES, STARVED_WAIT, evidence, saturation
from campaigns.spec import RunSpec
from storageops.units import human_duration, share, si
from storageops.units import human_rate as format_rate

KNEE_FRACTION = 0.95
# Two runs of the same step on shared storage differ by several per cent (a flat, CPU-bound
# curve read 638, 632, 635, 674 MB/s here): a last step less than this far above every earlier
# step has not shown a rise, and the knee is judged against the best earlier step instead.
RISE_BEYOND_NOISE = 0.10
SATURATED = 0.90
# A curve a resource stayed full through may still creep up (its work batches up): less than this
# share of the gain proportional to the added concurrency is the resource holding it, not a rise.
HELD_EFFICIENCY = 0.25
# A door's configured data-rate cap binds below its number: XRootD's throttle charges each read
# the bytes it asks for, not those it returns (a door behind a 12 MB/s throttle served 4 MiB files
# at 8.3 MB/s, 69 %, every other resource idle), so a door at this share of its cap is at it.
RATE_SATURATED = 0.60
# A step where this share of requests fails with checksum timeouts or HTTP 5xx is overloaded
# even if no sampled resource is: the door's own limits (xrootd.chksum max, thread pools). A
# healthy door times out no checksum at all: behind `xrootd.chksum max 1`, 2 of 135 requests
# (1.5 %) timed out at the step where throughput fell by 40 %, under a 5 % rule unseen.
OVERLOAD_ERROR_RATE = 0.01

# Between resources equally saturated (within TIE), the narrower one is the better diagnosis: a
# machine whose CPU is full because its daemon fills the cores it may use is the daemon's CPU.
TIE = 0.02
_SPECIFIC = ("cpu", "memory", "disk", "network", "cores", "daemon_cpu", "rate")
_CPU_WITHIN = ("cores", "daemon_cpu")  # parts of a host's CPU: the cores it may use, its daemon's share


# -- knee -----------------------------------------------------------------------------------
def knee(steps: list[dict], axes: list[str] | tuple[str, ...] = ()) -> dict:
    """Peak and knee of a concurrency curve given as the step table of a run summary.

    A step sits on the curve at the concurrency it achieved (`concurrency.x`: its copies' mean
    in flight), not at the one it asked for: through FTS a step of 4 ran at 1.48, and a knee
    "at 4" would have been read from a point the storage never saw. `read_from` lists the steps
    the curve was read from, for the verdict to say which of them ran off target.

    In a sweep over other knobs too (`axes`: streams, TCP buffer, mode), the curve is the
    concurrency row of the best step's setting: a knee read across rows would mix two curves."""
    scored = [s for s in steps if s.get("throughput_bps") and s.get("concurrency")]
    if not scored:
        return {"status": "no_data", "peak": None, "knee": None, "read_from": [], "plateau": []}
    peak = max(scored, key=lambda s: s["throughput_bps"])
    if axes:
        scored = [s for s in scored if all(s.get(a) == peak.get(a) for a in axes)]
    x = concurrency.x
    furthest = max(x(s) for s in scored)
    reference = peak
    earlier = [s for s in scored if x(s) < furthest]
    if earlier and x(peak) == furthest:
        best_earlier = max(earlier, key=lambda s: s["throughput_bps"])
        if peak["throughput_bps"] <= (1 + RISE_BEYOND_NOISE) * best_earlier["throughput_bps"]:
            reference = best_earlier
    reaching = [s for s in scored if s["throughput_bps"] >= KNEE_FRACTION * reference["throughput_bps"]]
    # Steps that achieved about the same concurrency (within OFF_TARGET of the lowest) are one
    # point of the curve: the one that ran on target names it (a step of 4 that ran at 1.98 is
    # the step of 2 again, not a knee "at 4").
    lowest = min(x(s) for s in reaching)
    near = [s for s in reaching if x(s) <= lowest * (1 + concurrency.OFF_TARGET)]
    at = min(near, key=lambda s: (concurrency.achieved(s)[2], x(s), s["step"]))
    if len({s["concurrency"] for s in scored}) < 2:
        status = "single_step"
    elif x(at) == furthest:
        status = "still_rising"
    else:
        status = "levelled"

    return {"status": status, "peak": _point(peak, axes), "knee": _point(at, axes),
            "read_from": [s["step"] for s in scored],
            # The steps whose throughput reached the knee's level: after them the curve did not
            # rise beyond noise, which a bottleneck needs beside its saturated resource.
            "plateau": [s["step"] for s in reaching]}  # fmt: skip


def _point(s: dict, axes: list[str] | tuple[str, ...] = ()) -> dict:
    mean, most, off = concurrency.achieved(s)
    measured = {"achieved_mean": mean, "achieved_max": most, "off_target": off} if mean is not None else {}
    return {"step": s["step"], "concurrency": s["concurrency"], "throughput_bps": s["throughput_bps"],
            **measured, **{a: s.get(a) for a in axes}}  # fmt: skip


def held(curve: dict, steps: list[dict], full_at: dict[int, list]) -> dict | None:
    """A curve "still rising" that a resource held all the same: the resource full (binding) at
    a step and at every step after it, and the throughput after that step risen by less than
    HELD_EFFICIENCY of what the added concurrency would give a curve scaling in proportion.

    A door held to a tenth of a core read 6.19, 11.5, 11.2, 13.8 MB/s at 1, 2, 4, 8, its quota
    at 94-98 % from 2 on: 20 % more for four times the copies is a resource at its limit giving
    a little more as its work batches up, not a knee beyond the sweep. A curve that doubled with
    a CPU at 99.8 % is not held (a reading that cannot be the limit), nor one whose resource
    was full at one step only.

    Returns {"step", "rose", "to", "efficiency"} for the first such step, with the curve's knee to
    be read there; None when the curve is not still rising or no resource held it."""
    if curve["status"] != "still_rising" or len(steps) < 2:
        return None
    x = concurrency.x
    read = sorted((s for s in steps if s["step"] in curve["read_from"]), key=lambda s: s["step"])
    for n, s in enumerate(read[:-1]):
        later = read[n + 1 :]
        if not all(full_at.get(t["step"]) for t in (s, *later)) or not s.get("throughput_bps") or not x(s):
            continue
        best = max(later, key=lambda t: t["throughput_bps"])
        rose = best["throughput_bps"] / s["throughput_bps"] - 1
        grown = max(x(t) for t in later) / x(s) - 1
        if grown > 0 and rose / grown < HELD_EFFICIENCY:
            return {"step": s["step"], "rose": rose, "to": best["concurrency"], "efficiency": rose / grown}
    return None


def _held_curve(curve: dict, steps: list[dict], at: dict) -> dict:
    """The curve with its knee at the step a resource held it from: levelled there."""
    knee_step = next(s for s in steps if s["step"] == at["step"])
    plateau = [s for s in curve["read_from"] if s >= at["step"]]
    return {**curve, "status": "levelled", "knee": _point(knee_step), "plateau": plateau}


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
        result["note"] = "no target rate set (the campaign's, or the site's STORAGEOPS_TARGET_RATE_BPS)"
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
    steps = summary.get("steps", [])
    curve = knee(steps, RunSpec.of(run).swept_axes)
    read = [s for s in steps if s["step"] in curve["read_from"]]
    off = concurrency.off_target(read)
    status = curve["status"]
    if read and len(off) == len(read):
        # Every point of the curve ran at another concurrency than its own: there is no curve of
        # the concurrencies asked for to read a knee from, and no knee to judge a bottleneck at.
        status = "inconclusive"
    knee_point = curve["knee"] if status != "inconclusive" else None
    table, per_step, used = saturation(run, summary, end)
    full_at = {
        index: [r for r in readings if r.binding and not r.side and (r.value >= _saturated_at(r) or r.quota_bound)]
        for index, readings in per_step.items()
    }
    held_from = held(curve, steps, full_at) if status == "still_rising" and not RunSpec.of(run).swept_axes else None
    if held_from:
        curve = _held_curve(curve, steps, held_from)
        status, knee_point = curve["status"], curve["knee"]
    ran_at = {s["step"]: concurrency.ran_at(s) for s in steps}
    bottleneck = None
    overloaded = None
    plateau = set(curve.get("plateau") or ())
    near_limit = far_side = None
    for step in table:
        where = {"step": step["step"], "concurrency": step["concurrency"]}
        # A daemon throttled by its cgroup's quota in a tenth of its periods or more was held back
        # by it, whatever its mean use: the kernel's counters are the evidence (cpu.stat).
        full = [r for r in per_step[step["step"]] if r.binding and (r.value >= _saturated_at(r) or r.quota_bound)]
        hot = [r for r in full if not r.side]
        far_hot = [r for r in full if r.side]
        # As a bottleneck: full at the knee, not only somewhere past it (a source door starved at
        # x8 does not explain a curve level from x1).
        at_knee = knee_point and step["step"] <= knee_point["step"] and step["step"] in plateau
        if at_knee and far_side is None and far_hot and status == "levelled":
            top = _narrowest(far_hot)
            far_side = {**asdict(top), "title": top.title, **where, "evidence": evidence(top, step)}
        if knee_point and bottleneck is None and hot and step["step"] <= knee_point["step"]:
            top = _narrowest(hot)
            found = {**asdict(top), "title": top.title, **where, "evidence": evidence(top, step)}
            if step["step"] in ran_at:
                found["ran_at"] = ran_at[step["step"]]
            # Both kinds of evidence, or no bottleneck: the resource full at this step, and the
            # curve not rising beyond noise after it (the step is on the knee's plateau). A door
            # at 99.8 % while throughput doubled after it held nothing back.
            if step["step"] in plateau and status == "levelled":
                bottleneck = found
            else:
                near_limit = {**found, **_still_rose(steps, step["step"], status)}
        # Overload errors are worth saying wherever they start: past the knee they say why
        # more concurrency did not help.
        rate = step["overload_error_rate"]
        if overloaded is None and rate is not None and rate >= OVERLOAD_ERROR_RATE:
            overloaded = {**where, "rate": rate}
    doors = _door_count(summary)
    verdict = {
        "status": status,
        "peak": curve["peak"],
        "knee": knee_point,
        # A curve that crept up while a resource stayed full from the knee on: how much it rose.
        "held": held_from,
        "off_target": [_off_target_point(s) for s in off],
        "bottleneck": bottleneck,
        # Saturated, but the curve still rose after it (or no step after it was tried).
        "near_limit": None if bottleneck else near_limit,
        # Nothing of the working side held the plateau back, a door of the other side was full.
        "far_side": None if bottleneck else far_side,
        "overload_errors": overloaded,
        "samples_used": used,
        "saturation": table,
        "capacity": capacity(knee_point, doors, target_rate_bps(run), status == "still_rising"),
        "thresholds": {
            "knee": KNEE_FRACTION,
            "saturated": SATURATED,
            "rate_cap": RATE_SATURATED,
            "starved_wait": STARVED_WAIT,
            "overload_error_rate": OVERLOAD_ERROR_RATE,
            "off_target": concurrency.OFF_TARGET,
        },
        "computed_at": timezone.now().isoformat(),
    }
    # Steps the engine itself held below their target (its own scheduling): said, with what to change.
    verdict.update(engine_notes.find_all(run, steps))
    if RunSpec.of(run).kind == CampaignKind.CHECKSUM_LOAD:
        verdict["latency"] = latency_curve(steps)
    verdict["headline"] = headline(verdict)
    return verdict


def _saturated_at(reading) -> float:
    return RATE_SATURATED if reading.resource == "rate" else SATURATED


def _narrowest(hot: list) -> object:
    """Of the readings at or over SATURATED, the fullest; between equally full ones the narrower
    (a daemon's CPU is part of its host's: with both saturated, the narrower names the limit; a
    host kept busy by other work read 100 % beside a door at 97 % of its quota)."""
    # A configured cap is the most specific cause there is, however full it reads against its number.
    capped = [r for r in hot if r.resource == "rate"]
    if capped:
        return max(capped, key=lambda r: r.value)
    fullest = max(r.value for r in hot)
    top = max((r for r in hot if r.value >= fullest - TIE), key=lambda r: _SPECIFIC.index(r.resource))
    nested = [r for r in hot if r.door == top.door and r.resource in _CPU_WITHIN]
    if top.resource == "cpu" and nested:
        top = max(nested, key=lambda r: _SPECIFIC.index(r.resource))
    return top


def _still_rose(steps: list[dict], index: int, status: str) -> dict:
    """How the curve went on after a saturated step: the rise to the best later step, or why
    there is none to read ({"rose": share, "to": concurrency} / {"after": "last" | "single"})."""
    if status == "single_step":
        return {"after": "single"}
    at = next((s for s in steps if s["step"] == index), None)
    later = [s for s in steps if s["step"] > index and s.get("throughput_bps")]
    if not at or not at.get("throughput_bps") or not later:
        return {"after": "last"}
    best = max(later, key=lambda s: s["throughput_bps"])
    return {"after": "rose", "rose": best["throughput_bps"] / at["throughput_bps"] - 1, "to": best["concurrency"]}


def _off_target_point(step: dict) -> dict:
    mean, peak, _ = concurrency.achieved(step)
    return {"step": step["step"], "concurrency": step["concurrency"], "achieved_mean": mean, "achieved_max": peak}


def _thin(v: dict) -> str:
    """The steps at or before the knee whose doors had too few samples to be judged."""
    knee_step = v["knee"]["step"] if v.get("knee") else None
    return "; ".join(
        thin_text(row) for row in v.get("saturation") or [] if (knee_step is None or row["step"] <= knee_step)
        and row.get("not_enough_samples")
    )  # fmt: skip


def thin_text(row: dict) -> str:
    """A step's doors with too few samples, with what would have been enough: the verdict's
    sentence and the saturation table say the same."""
    parts = []
    for door, n in sorted(row.get("not_enough_samples", {}).items()):
        text = f"{door}: {n} sample{'s' if n != 1 else ''} in the step at concurrency {row['concurrency']}"
        interval = (row.get("sample_interval") or {}).get(door)
        if interval:
            seconds = row.get("seconds")
            length = f" of {seconds:.0f} s" if seconds is not None else ""
            text += (
                f"{length}, {MIN_SAMPLES} needed: its collector samples every {interval:g} s, so steps of at "
                f"least {(MIN_SAMPLES + 1) * interval:g} s (or a shorter sample interval)"
            )
        parts.append(text)
    return "; ".join(parts)


# -- what a verdict says: one generator for its headline and its rows ----------------------
# The kinds of verdict: the curve's status, then what it says of saturation (its cause). Every
# pair a verdict can be is listed in docs/verdicts.md; tests/campaigns/results/
# test_verdict_sentences.py builds each and holds the headline and the page's rows to each other.
STATUSES = {
    "no_data": "no step moved data",
    "single_step": "one concurrency only",
    "levelled": "the knee comes before the largest concurrency achieved",
    "still_rising": "the knee is the largest concurrency achieved",
    "inconclusive": "every step the curve is read from ran more than 10 % off its target concurrency",
}
CAUSES = {
    "bottleneck": "a resource reached 90 % at the knee, and the curve did not rise beyond noise after it",
    "near_limit": "a resource reached 90 %, but the curve still rose after it (or no later step was tried)",
    "far_side": "nothing of the working side saturated at the knee, a door of the other side did",
    "no_samples": "no collector samples of the run's hosts in its steps",
    "thin_samples": "a door had fewer than two samples in a step at or before the knee",
    "overload_only": "no sampled resource saturated, but overload errors reached 1 %",
    "nothing_yet": "nothing saturated, and the curve is still rising",
    "elsewhere": "nothing saturated at or before the knee",
    "not_judged": "no knee to judge a bottleneck at (no data, or inconclusive)",
}


def kind(v: dict) -> tuple[str, str]:
    """(status, cause) of a verdict: which of STATUSES and CAUSES its sentences are."""
    status = v.get("status") or "no_data"
    if status in ("no_data", "inconclusive"):
        return status, "not_judged"
    if v.get("bottleneck"):
        return status, "bottleneck"
    if v.get("far_side"):
        return status, "far_side"
    if v.get("near_limit"):
        return status, "near_limit"
    if not v.get("samples_used"):
        return status, "no_samples"
    if _thin(v):
        return status, "thin_samples"
    if v.get("overload_errors"):
        return status, "overload_only"
    return status, "nothing_yet" if status == "still_rising" else "elsewhere"


def statements(v: dict) -> dict[str, str]:
    """The verdict's sentences by row (latency, curve, concurrency, bottleneck, overload,
    capacity), in the headline's order; a row with nothing to say is left out. The headline is
    these joined, and the page shows each beside its label: they cannot disagree."""
    status, cause = kind(v)
    knee_point, peak, b, o = v.get("knee"), v.get("peak"), v.get("bottleneck"), v.get("overload_errors")
    out: dict[str, str] = {}
    if v.get("latency"):
        # A checksum load is read by its latency first; the bytes the door read come after.
        out["latency"] = latency_sentence(v["latency"]).strip()
    off = v.get("off_target") or []
    if status == "no_data":
        out["curve"] = "No step moved any data: there is no curve to read."
    elif status == "inconclusive":
        out["curve"] = (
            f"Inconclusive: no step ran at its target concurrency ({_off_list(off)} copies in flight on average, "
            f"more than {share(concurrency.OFF_TARGET)} off): the throughput cannot be read as a curve of "
            "the concurrencies asked for, so no knee, bottleneck or door count is given."
        )
    else:
        out["curve"] = _curve_sentence(status, knee_point, peak)
        if off:
            out["concurrency"] = (
                f"Off target: {_off_list(off)} copies in flight on average, more than "
                f"{share(concurrency.OFF_TARGET)} from {'its target' if len(off) == 1 else 'their targets'}; "
                "the curve is read at the concurrency achieved."
            )
    if status != "no_data":
        out.update((note.row, text) for note, text in engine_notes.said(v))
    at = b and (b.get("ran_at") or b.get("concurrency"))
    if cause == "far_side":
        f = v["far_side"]
        working = "destination" if f["side"] == "source" else "source"
        at = f.get("ran_at") or f["concurrency"]
        out["bottleneck"] = (
            f"Nothing saturated on the {working} doors at the knee: the limit is elsewhere, on the {f['side']} "
            f"side: {f['title']} at {share(f['value'])} ({f['detail']}) from concurrency {at}."
        )
    elif cause == "near_limit":
        out["bottleneck"] = _near_limit_sentence(v["near_limit"])
    elif cause == "bottleneck":
        out["bottleneck"] = f"Bottleneck: {b['title']} at {share(b['value'])} ({b['detail']}) from concurrency {at}."
        if v.get("held"):
            h = v["held"]
            out["bottleneck"] += (
                f" It stayed full at every later step, where throughput rose only {share(h['rose'])} more "
                f"to concurrency {h['to']}: the limit, not a rise."
            )
    elif cause == "no_samples":
        out["bottleneck"] = "Saturation unknown: no collector samples of the run's hosts in its steps."
    elif cause == "thin_samples":
        out["bottleneck"] = f"Saturation unknown where it matters: not enough samples ({_thin(v)})."
    elif cause == "overload_only":
        out["bottleneck"] = "No sampled resource saturated."
    elif cause == "nothing_yet":
        out["bottleneck"] = "Nothing saturated yet."
    elif cause == "elsewhere":
        out["bottleneck"] = (
            "Nothing saturated at or before the knee: the limit is elsewhere "
            "(the source, the network path, the clients, or the concurrency itself)."
        )
    if o and status != "no_data":
        out["overload"] = (
            f"From concurrency {o['concurrency']}, {share(o['rate'], 1)} of requests failed with checksum timeouts "
            "or HTTP 5xx: the doors' own limits (e.g. xrootd.chksum max) or overload."
        )
    cap = v.get("capacity")
    if cap and cap.get("doors_needed"):
        bound = "At most " if cap.get("bound") else ""
        out["capacity"] = (
            f"{bound}{cap['doors_needed']} door(s) like these for {cap['target_rate_bits'] / 1e9:g} Gbit/s "
            f"at {format_rate(cap['per_door_bps'])} per door"
            + (" (the curve was still rising: a door can do more)." if bound else ".")
        )
    return out


def _near_limit_sentence(n: dict) -> str:
    """Saturated but not (yet) the limit, with the figures that say so."""
    at = n.get("ran_at") or n["concurrency"]
    full = f"{n['title']} at {share(n['value'])} ({n['detail']}) at concurrency {at}"
    if n.get("after") == "rose":
        return (
            f"Near its limit, not yet the limit: {full}, while throughput still rose {share(n['rose'])} "
            f"to concurrency {n['to']}."
        )
    if n.get("after") == "single":
        return f"Near its limit: {full}; one concurrency only, so a sweep must tell whether it holds throughput back."
    return f"Near its limit: {full}, the last step; a step beyond it must tell whether it holds the curve back."


def rows(v: dict) -> dict[str, str]:
    """The Knee, Peak and Capacity rows of a page, in the words of the curve's sentence: a curve
    still rising has no knee (a row "Knee: concurrency 8" under "the knee lies beyond this sweep" once
    contradicted its own headline)."""
    status, knee_point, peak = v.get("status"), v.get("knee"), v.get("peak")
    out: dict[str, str] = {}
    if status in (None, "no_data", "inconclusive") or not knee_point:
        return out
    at = concurrency.ran_at
    if status == "still_rising":
        out["knee"] = f"not reached (still rising at ×{at(knee_point)}, {format_rate(knee_point['throughput_bps'])})"
    elif status == "single_step":
        out["knee"] = "not found (one concurrency only)"
    else:
        out["knee"] = f"concurrency {at(knee_point)} — {format_rate(knee_point['throughput_bps'])}"
    if peak:
        out["peak"] = f"concurrency {at(peak)} — {format_rate(peak['throughput_bps'])}"
    cap = v.get("capacity")
    if cap:
        where = (
            f"at the last step (×{at(knee_point)}; the knee not reached: a door can do more)"
            if status == "still_rising"
            else "at the knee"
        )
        if cap.get("doors_needed"):
            bound = "at most " if cap.get("bound") else ""
            then = f"{bound}{cap['doors_needed']} door(s) for {cap['target_rate_text']}"
        else:
            then = cap.get("note") or ""
        out["capacity"] = f"{format_rate(cap['per_door_bps'])} per door {where}; {then}".rstrip("; ")
    return out


def _off_list(off: list[dict]) -> str:
    """The off-target steps in words: x2 ran at 1.28 (max 2), x4 at 1.48 (max 3), with the sign."""
    parts = []
    for n, p in enumerate(off):
        mean = p.get("achieved_mean")
        most = f" (max {p['achieved_max']})" if p.get("achieved_max") is not None else ""
        parts.append(f"×{p['concurrency']} {'ran ' if n == 0 else ''}at {mean:.2f}{most}")
    return ", ".join(parts)


def _curve_sentence(status: str, knee_point: dict, peak: dict) -> str:
    at = concurrency.ran_at
    if status == "single_step":
        curve = f"One concurrency only ({at(knee_point)}, {format_rate(peak['throughput_bps'])}): no knee to find."
    elif status == "still_rising":
        curve = (
            f"Still rising at the last step (concurrency {at(knee_point)}, "
            f"{format_rate(knee_point['throughput_bps'])}): the knee lies beyond this sweep."
        )
    else:
        curve = (
            f"Knee at concurrency {at(knee_point)} ({format_rate(knee_point['throughput_bps'])}; "
            f"peak {format_rate(peak['throughput_bps'])} at {at(peak)})."
        )
    setting = sweeps.setting_text(knee_point)
    if setting:
        # A sweep over more than concurrency: the curve read is the best setting's.
        curve = f"{curve[:-1]}, with {setting} (the best setting's curve)."
    return curve


def headline(v: dict) -> str:
    """The verdict in one line: its statements joined."""
    return " ".join(statements(v).values())


# What the verdict's badge says and how it is coloured. Never the colour of success: a verdict
# describes a curve, not a good outcome, and a failed run's "no data" once showed green.
BADGES = {
    "no_data": ("no data", "pending"),
    "single_step": ("one step", "pending"),
    "levelled": ("levelled off", "pending"),
    "still_rising": ("still rising", "running"),
    "inconclusive": ("inconclusive", "partial"),
}


def mark(v: dict | None) -> dict | None:
    """What a run list shows beside a run's state when its verdict says its steps did not run as
    asked (a run that "succeeded" at 25 MB/s while its engine's scheduling held every step below
    its concurrency must not read as plain success): the engine's first note (engine_notes), else
    inconclusive, else off target; None when the verdict has nothing of the kind."""
    if not v:
        return None
    status = v.get("status")
    said = statements(v) if "samples_used" in v else {}
    noted = [note for note in engine_notes.registered() if v.get(note.key)] if status != "no_data" else []
    if noted:
        key, label, title = noted[0].key, noted[0].label, said.get(noted[0].row)
    elif status == "inconclusive":
        key, label, title = "inconclusive", "inconclusive", said.get("curve")
    elif v.get("off_target"):
        key, label, title = "off_target", "off target", said.get("concurrency")
    else:
        return None
    return {"key": key, "label": label, "css": "partial", "title": title or v.get("headline", "")}


def view(v: dict) -> dict:
    """What a page shows of a verdict: its badge, headline and the sentence of each row.

    A full verdict (as stored with a run) is said again by `statements`, so its rows and
    headline come from one generator even for a run judged by an earlier release; the short
    form a comparison row carries (comparison._verdict_line) brings its own headline and cause.
    """
    status = v.get("status") or "no_data"
    label, css = BADGES.get(status, (status.replace("_", " "), "pending"))
    if v.get("bottleneck") and status != "inconclusive":
        css = "failed"
    if "samples_used" in v:
        said = statements(v)
        text = headline(v)
    else:
        said = {"bottleneck": v["cause"]} if v.get("cause") else {}
        text = v.get("headline", "")
    # The row is labelled "Bottleneck" already: its sentence without the word again.
    cause = (said.get("bottleneck") or f"Not judged: {CAUSES['not_judged']}.").removeprefix("Bottleneck: ")
    shown = rows(v) if "samples_used" in v else {k: v[k] for k in ("knee_text",) if v.get(k)}
    if "knee_text" in shown:
        shown = {"knee": shown["knee_text"]}
    # The engine's notes as rows of their own, each under its title.
    notes = [{"row": n.row, "title": n.title, "text": said[n.row]} for n in engine_notes.registered() if n.row in said]
    return {"badge": label, "css": css, "headline": text, "statements": said, "cause": cause, "rows": shown,
            "notes": notes}  # fmt: skip

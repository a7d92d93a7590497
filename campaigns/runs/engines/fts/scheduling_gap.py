"""FTS's scheduling gap in a verdict: steps held below their target because FTS starts queued
files only at its scheduler's pass (SchedulingInterval, 2 s by default): a slot freed just after a
pass stays empty until the next one. On a real FTS 3.14.4, 64-MiB copies of about 2.5 s ran at
0.65 of 1, 1.46 of 2 and 2.81 of 4 copies in flight on average: each slot idled about 1.5 s after
each copy. Copies several times longer than the pass keep the slots full.

The idle time itself is measured per step for every engine (campaigns.results.refill_gap);
`explain` says when an FTS step's shortfall below its target is this gap: its copies are shorter
than GAP_MULTIPLE scheduling passes (9: below that a slot idling up to a pass after each copy may
take a step more than 10 % off), its slots idled up to a pass after each copy, and that idle time
alone takes the step off target.
"""

from __future__ import annotations

import math

from campaigns.models import Run
from campaigns.results import concurrency
from campaigns.results.refill_gap import gap

# A slot freed between two passes idles until the next: up to a pass after each copy, P - (L mod
# P) for copies of L s under a pass of P s (2.5-s copies, 2-s pass: 1.5 s, 0.625 of the target, as
# FTS 3.14.4 ran them). The slot is within OFF_TARGET of full whatever the phase only if a pass
# is at most OFF_TARGET of a copy and its gap: copies of 9 passes. At 4 passes it may read 0.8.
GAP_MULTIPLE = round((1 - concurrency.OFF_TARGET) / concurrency.OFF_TARGET)
# FTS's start and finish times are whole seconds: a gap read from them may be a second longer.
TIME_RESOLUTION = 1.0
# FTS's SchedulingInterval (seconds between its scheduler's passes) when the campaign does not
# give the instance's: FTS's own default.
DEFAULT_SCHEDULING_INTERVAL = 2.0


def fts_pass(snapshot: dict) -> tuple[float, bool, bool] | None:
    """From an FTS run's frozen snapshot: its scheduling pass in seconds, whether that is FTS's
    default (assumed, not given), and whether StorageOps kept files queued in FTS (link limits
    managed); None for a run through another engine (no FTS instance frozen). Read from the
    snapshot as frozen, since results must not import the engine."""
    if not snapshot.get("fts"):
        return None
    given = ((snapshot.get("parameters") or {}).get("engine_options") or {}).get("scheduling_interval")
    managed = bool((snapshot.get("fts") or {}).get("manage_link_limits"))
    return float(given or DEFAULT_SCHEDULING_INTERVAL), not given, managed


def explain(steps: list[dict], interval: float, *, assumed: bool, queue_ahead: bool) -> dict | None:
    """Where FTS's scheduling gap explains steps that ran below their target: the steps, their
    copies' length (median) and slots' idle time, and what would close the gap; None if none.

    A step is explained when it ran more than OFF_TARGET below its target, its median copy is
    shorter than GAP_MULTIPLE passes, its mean gap is at most a pass (plus FTS's time
    resolution), and a slot busy for a copy then idle for that gap alone is off target.
    `assumed`: the interval is FTS's default, not the campaign's; `queue_ahead`: StorageOps kept
    files queued in FTS (link limits managed), so queueing more would not close the gap."""
    found = []
    for s in steps:
        mean, _, off = concurrency.achieved(s)
        idle, count = gap(s)
        copy, target = s.get("duration_p50"), s.get("concurrency")
        if not off or mean is None or not target or mean >= target or idle is None or not count or not copy:
            continue
        if copy >= GAP_MULTIPLE * interval or idle > interval + TIME_RESOLUTION:
            continue
        if not concurrency.is_off_target(target * copy / (copy + idle), target):
            continue
        files = s.get("files_ok") or 0
        found.append(
            {"step": s["step"], "concurrency": target, "achieved_mean": mean, "copy_seconds": copy,
             "gap_seconds": idle, "gaps": count, "file_bytes": s.get("bytes", 0) / files if files else None}
        )  # fmt: skip
    if not found:
        return None
    copy = sum(f["copy_seconds"] for f in found) / len(found)
    idle = sum(f["gap_seconds"] for f in found) / len(found)
    # Files long enough to copy for GAP_MULTIPLE passes at the rate the steps' copies ran.
    needed = [f["file_bytes"] * GAP_MULTIPLE * interval / f["copy_seconds"] for f in found if f["file_bytes"]]
    return {
        "interval": interval,
        "interval_assumed": assumed,
        "multiple": GAP_MULTIPLE,
        "copy_seconds": round(copy, 3),
        "gap_seconds": round(idle, 3),
        "min_file_bytes": math.ceil(max(needed) / 1e6) * 10**6 if needed else None,
        "queue_ahead": queue_ahead,
        "steps": found,
    }


def sentence(g: dict) -> str:
    """The verdict's Scheduling row: what held the steps below target, and what to change."""
    interval, copy = g["interval"], g["copy_seconds"]
    whose = "FTS's default" if g.get("interval_assumed") else "the instance's"
    steps = ", ".join(
        f"×{f['concurrency']} {'ran ' if n == 0 else ''}at {f['achieved_mean']:.2f}" for n, f in enumerate(g["steps"])
    )
    remedies = []
    if g.get("min_file_bytes"):
        remedies.append(f"use larger files (≥ {g['min_file_bytes'] / 1e6:.0f} MB)")
    remedies.append(f"lower the instance's SchedulingInterval (below {copy / g['multiple']:.1f} s)")
    if not g.get("queue_ahead"):
        remedies.append("queue more files per link (the instance's manage_link_limits: StorageOps then keeps "
                        "files queued in FTS)")  # fmt: skip
    text = (
        f"Scheduling gap: copies of {copy:.1f} s are shorter than {g['multiple']} × {whose} {interval:g}-s "
        f"scheduling pass (SchedulingInterval): slots idle {g['gap_seconds']:.1f} s after each copy ({steps}); "
        f"{', or '.join(remedies)}."
    )
    if g.get("interval_assumed"):
        text += (
            f" (The pass is assumed to be FTS's default {interval:g} s: set the campaign's FTS scheduling "
            "interval if the instance's differs.)"
        )
    return text


def find(run: Run, steps: list[dict]) -> dict | None:
    """The verdict's note: where an FTS run's steps ran below target because FTS starts files
    only at its scheduler's pass; None for a run through another engine or where nothing says so."""
    scheduling = fts_pass(run.snapshot or {})
    if scheduling is None:
        return None
    seconds, assumed, queue_ahead = scheduling
    return explain(steps, seconds, assumed=assumed, queue_ahead=queue_ahead)

"""The latency of a checksum load, per step: what its verdict is read by first."""

from __future__ import annotations

from storageops.units import human_duration


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

"""Runs side by side, the way the BNL tables put backends: throughput aggregate and per door,
CPU per door (when collectors sampled the doors), success rate, error mix, peak step, and
the parameters that differ."""

from __future__ import annotations

from collections.abc import Sequence

from django.db.models import Avg

from campaigns.models import Run
from collectors.models import MetricSample

MAX_RUNS = 8


def door_cpu(run: Run) -> dict[str, float | None]:
    """Mean CPU % of each door over the run's window, from the collectors' samples.

    Retention freezes this figure into the run's summary before the samples go.
    """
    frozen = (run.summary or {}).get("door_cpu_percent")
    if frozen is not None:
        return frozen
    if not run.started_at or not run.finished_at:
        return {}
    hosts = {
        h["name"]
        for ep in [*run.snapshot.get("sources", []), *run.snapshot.get("destinations", [])]
        for h in ep.get("hosts", [])
    }
    rows = (
        MetricSample.objects.filter(
            host__name__in=hosts, metric="cpu.percent", time__gte=run.started_at, time__lte=run.finished_at
        )
        .values("host__name")
        .annotate(mean=Avg("value"))
    )
    return {row["host__name"]: row["mean"] for row in rows}


def _peak(steps: list[dict]) -> dict | None:
    scored = [s for s in steps if s.get("throughput_bps")]
    if not scored:
        return None
    best = max(scored, key=lambda s: s["throughput_bps"])
    return {"step": best["step"], "concurrency": best["concurrency"], "throughput_bps": best["throughput_bps"]}


def _verdict_line(verdict: dict | None) -> dict | None:
    """The part of a run's verdict a side-by-side table shows: headline, knee, bottleneck."""
    if not verdict:
        return None
    bottleneck = verdict.get("bottleneck")
    return {
        "status": verdict["status"],
        "headline": verdict["headline"],
        "knee": verdict.get("knee"),
        "bottleneck": bottleneck and {k: bottleneck[k] for k in ("title", "door", "resource", "label", "value")},
        "doors_needed": (verdict.get("capacity") or {}).get("doors_needed"),
    }


def compare(runs: Sequence[Run]) -> dict:
    if not 1 <= len(runs) <= MAX_RUNS:
        raise ValueError(f"Compare 1 to {MAX_RUNS} runs.")
    params = [r.snapshot.get("parameters", {}) for r in runs]
    keys = sorted({k for p in params for k in p})
    differing = [k for k in keys if len({repr(p.get(k)) for p in params}) > 1 and k != "name"]
    rows = []
    for run in runs:
        summary = run.summary or {}
        total = summary.get("total", {})
        rows.append(
            {
                "run": run.pk,
                "campaign": run.campaign.name,
                "state": run.state,
                "disturbed": run.disturbed,
                "backends": sorted({b["name"] for b in run.snapshot.get("backends", [])}),
                "throughput_bps": total.get("throughput_bps"),
                "success_rate": total.get("success_rate"),
                "files_ok": total.get("files_ok"),
                "files_failed": total.get("files_failed"),
                "errors": total.get("errors", {}),
                "duration_p50": total.get("duration_p50"),
                "duration_p95": total.get("duration_p95"),
                "doors": {name: d.get("throughput_bps") for name, d in summary.get("doors", {}).items()},
                "door_cpu_percent": door_cpu(run),
                "peak": _peak(summary.get("steps", [])),
                "verdict": _verdict_line(summary.get("verdict")),
                "steps": [
                    {
                        "concurrency": s["concurrency"],
                        "throughput_bps": s["throughput_bps"],
                        # Latency and failures per step: what a checksum-load comparison reads.
                        "duration_p50": s.get("duration_p50"),
                        "duration_p95": s.get("duration_p95"),
                        "latency_p95": s.get("latency_p95"),
                        "files_failed": s.get("files_failed"),
                        "errors": s.get("errors", {}),
                    }
                    for s in summary.get("steps", [])
                ],
                "parameters": {k: run.snapshot.get("parameters", {}).get(k) for k in differing},
            }
        )
    return {"runs": rows, "differing_parameters": differing}

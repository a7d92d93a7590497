"""Runs side by side, the way the BNL tables put backends: throughput aggregate and per door,
CPU per door (when collectors sampled the doors), success rate, error mix, peak step, and
the parameters that differ.

A run's parameters are read through its RunSpec, so a run frozen before a field existed
compares equal to one frozen with that field's default (baselines line runs up the same way)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.core.exceptions import ValidationError

from campaigns import sweeps
from campaigns.models import Run
from campaigns.results import bucketed, charts, concurrency, disturbance, readers, verdicts
from campaigns.results.scope import run_window
from campaigns.spec import PARAMETER_NAMES, RunSpec
from storageops.validators import MAX_ROW_ID

MAX_RUNS = 8


@dataclass(frozen=True)
class Trim:
    """What a comparison leaves out: the first and last seconds of each run (warm-up, tail),
    and the minutes around its disturbing events (None: keep them)."""

    warmup_seconds: float = 0
    tail_seconds: float = 0
    event_margin_seconds: float | None = None

    @property
    def active(self) -> bool:
        return bool(self.warmup_seconds or self.tail_seconds or self.event_margin_seconds is not None)


def _plain(name: str, value: Any) -> Any:
    if name == "file_mix":
        return [{"count": count, "size": size} for count, size in value]
    return list(value) if isinstance(value, tuple) else value


def parameters(run: Run) -> dict[str, Any]:
    """Every parameter of the run's spec, as JSON values (what a comparison lines up)."""
    spec = RunSpec.of(run)
    return {name: _plain(name, getattr(spec, name)) for name in PARAMETER_NAMES}


def select_runs(run_ids: Sequence[int] = (), campaign_id: int | None = None) -> list[Run]:
    """The runs to compare, in the order asked, or the latest of each backend of a campaign."""
    if run_ids:
        # An id past bigint is simply no run (not a query that compares it as a numeric).
        storable = [i for i in run_ids if 0 < i <= MAX_ROW_ID]
        found = {r.pk: r for r in Run.objects.select_related("campaign").filter(pk__in=storable)}
        missing = [i for i in run_ids if i not in found]
        if missing:
            raise ValidationError({"runs": f"No run with id {', '.join(map(str, missing))}."})
        selected = [found[i] for i in dict.fromkeys(run_ids)]
    elif campaign_id is not None:
        selected = latest_per_backend(campaign_id)
    else:
        raise ValidationError({"runs": "Give runs=ID,ID… or campaign=ID."})
    if not 1 <= len(selected) <= MAX_RUNS:
        raise ValidationError({"runs": f"Compare 1 to {MAX_RUNS} runs (got {len(selected)})."})
    return selected


def latest_per_backend(campaign_id: int) -> list[Run]:
    """The latest finished run of each destination backend among a campaign's runs."""
    chosen: dict[tuple, Run] = {}
    if not 0 < campaign_id <= MAX_ROW_ID:
        return []
    for run in Run.objects.select_related("campaign").filter(campaign_id=campaign_id, finished_at__isnull=False):
        key = tuple(sorted(ep.get("backend_name", "") for ep in run.snapshot.get("destinations", [])))
        if key not in chosen or run.finished_at > chosen[key].finished_at:
            chosen[key] = run
    return sorted(chosen.values(), key=lambda r: r.pk)[:MAX_RUNS]


def trimmed_summary(run: Run, trim: Trim) -> dict:
    """The run's total, step, door and error figures with the trimmed minutes left out, read from
    its time buckets (campaigns.results.bucketed: the cuts are widened to whole buckets, and what
    is kept is the bytes moved and the copies ended between them)."""
    window = run_window(run)
    if window is None:
        return {"total": {}, "steps": [], "doors": {}, "left_out": {}}
    if not trim.active:
        return bucketed.tables(run)
    width = bucketed.trim_width(run, (window[1] - window[0]).total_seconds())
    # No warm-up (tail) cut: no bound at the start (end), or the run's partial first bucket would go.
    start = window[0].timestamp() + trim.warmup_seconds if trim.warmup_seconds else -math.inf
    end = window[1].timestamp() - trim.tail_seconds if trim.tail_seconds else math.inf
    excluded = []
    if trim.event_margin_seconds is not None:
        excluded = disturbance.excluded_windows(run, timedelta(seconds=trim.event_margin_seconds))
    epochs = [(lo.timestamp(), hi.timestamp()) for lo, hi in excluded]
    cut = bucketed.widened(width, epochs)
    summary = bucketed.tables(run, width, bucketed.kept(width, start, end, epochs), cut)
    summary["left_out"]["windows"] = [[lo.isoformat(), hi.isoformat()] for lo, hi in cut]
    summary["left_out"]["bucket_seconds"] = width
    return summary


def figures(run: Run, trim: Trim | None = None) -> dict:
    """What a comparison row shows of a run: trimmed as asked, else its stored results, else
    (a live or crashed run) the same figures aggregated from its rows now."""
    if trim is None or not trim.active:
        kept = readers.stored(run)
        if kept is not None:
            return kept
    return trimmed_summary(run, trim or Trim())


def _verdict_line(verdict: dict | None) -> dict | None:
    """The part of a run's verdict a side-by-side table shows: headline, knee, bottleneck."""
    if not verdict:
        return None
    bottleneck = verdict.get("bottleneck")
    said = verdicts.view(verdict)
    return {
        "status": verdict["status"],
        "headline": said["headline"],
        "knee": verdict.get("knee"),
        # The Knee row in the curve's own words ("not reached (still rising at x8, ...)").
        "knee_text": verdicts.rows(verdict).get("knee", ""),
        "bottleneck": bottleneck and {k: bottleneck[k] for k in ("title", "door", "resource", "label", "value")},
        "doors_needed": (verdict.get("capacity") or {}).get("doors_needed"),
        # The bottleneck row in the same words as the headline (verdicts.statements), never a
        # "none" of its own beside a headline that says saturation is unknown.
        "cause": said["cause"],
    }


def _backends(run: Run, side: str) -> list[str]:
    return sorted({ep.get("backend_name", "") for ep in run.snapshot.get(side, [])} - {""})


def _endpoints(run: Run) -> dict[str, list[str]]:
    """The run's endpoints by direction, compared like any parameter: two runs whose sources and
    destinations were swapped differ here, though every other parameter is the same."""
    snapshot = run.snapshot
    return {side: sorted(ep.get("name", "") for ep in snapshot.get(side, [])) for side in ("sources", "destinations")}


def _peak(steps: list[dict]) -> dict | None:
    scored = [s for s in steps if s.get("throughput_bps")]
    if not scored:
        return None
    best = max(scored, key=lambda s: s["throughput_bps"])
    return {"step": best["step"], "concurrency": best["concurrency"], "throughput_bps": best["throughput_bps"],
            **_achieved(best)}  # fmt: skip


def _achieved(step: dict) -> dict:
    """A step's achieved concurrency as the comparison's rows carry it (concurrency.achieved)."""
    mean, peak, off = concurrency.achieved(step)
    return {"achieved_mean": mean, "achieved_max": peak, "off_target": off, "ran_at": concurrency.ran_at(step)}


def compare(runs: Sequence[Run], trim: Trim | None = None) -> dict:
    if not 1 <= len(runs) <= MAX_RUNS:
        raise ValueError(f"Compare 1 to {MAX_RUNS} runs.")
    params = [{**parameters(r), **_endpoints(r)} for r in runs]
    keys = sorted({k for p in params for k in p})
    differing = [k for k in keys if len({repr(p.get(k)) for p in params}) > 1 and k != "name"]
    trimming = trim is not None and trim.active
    rows = []
    for run, run_parameters in zip(runs, params, strict=True):
        summary = figures(run, trim)
        total = summary.get("total", {})
        rows.append(
            {
                "run": run.pk,
                "campaign": run.campaign.name,
                "state": run.state,
                "disturbed": run.disturbed,
                # The backend under test is the one written for writes and read for reads; a
                # third-party copy does both, so both are named, each by its direction.
                "backends": sorted({b["name"] for b in run.snapshot.get("backends", [])}),  # every one, as before
                "backends_written": _backends(run, "destinations"),
                "backends_read": _backends(run, "sources"),
                "throughput_bps": total.get("throughput_bps"),
                "success_rate": total.get("success_rate"),
                "files_ok": total.get("files_ok"),
                "files_failed": total.get("files_failed"),
                "errors": total.get("errors", {}),
                "duration_p50": total.get("duration_p50"),
                "duration_p95": total.get("duration_p95"),
                "doors": {name: d.get("throughput_bps") for name, d in summary.get("doors", {}).items()},
                "door_cpu_percent": readers.door_cpu(run),
                "verdict": _verdict_line(summary.get("verdict")),
                "peak": _peak(summary.get("steps", [])),
                "steps": [
                    {
                        "concurrency": s["concurrency"],
                        **_achieved(s),
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
                "parameters": {k: run_parameters.get(k) for k in differing},
                "all_parameters": run_parameters,
                "left_out": summary.get("left_out"),
            }
        )
    return {
        "runs": rows,
        "differing_parameters": differing,
        "trimmed": trimming,
        # The BNL table's rows: every door and every sampled host of any run, once.
        "door_names": sorted({name for row in rows for name in row["doors"]}),
        "cpu_hosts": sorted({name for row in rows for name in row["door_cpu_percent"]}),
        "parameter_table": [
            {"name": k, "values": [p.get(k) for p in params], "differs": k in differing} for k in keys if k != "name"
        ],
    }


def _cuts(run: Run, trim: Trim) -> list[tuple[float, float]]:
    """The trimmed periods of a run, in epoch ms: warm-up, tail and the margins around events."""
    window = run_window(run)
    if window is None or not trim.active:
        return []
    # A chart's bucket may begin before the run and end after it: the warm-up and tail cuts run
    # to either end of the chart, not to the run's first and last instant.
    ms: list[tuple[float, float]] = []
    if trim.warmup_seconds:
        ms.append((-math.inf, (window[0].timestamp() + trim.warmup_seconds) * 1000))
    if trim.tail_seconds:
        ms.append(((window[1].timestamp() - trim.tail_seconds) * 1000, math.inf))
    if trim.event_margin_seconds is not None:
        margin = timedelta(seconds=trim.event_margin_seconds)
        ms += [(lo.timestamp() * 1000, hi.timestamp() * 1000) for lo, hi in disturbance.excluded_windows(run, margin)]
    return ms


def _since(ms: float, origin: float) -> float | None:
    return None if math.isinf(ms) else round((ms - origin) / 1000, 1)


def overlay_series(runs: Sequence[Run], trim: Trim | None = None, x: str = "concurrency") -> dict:
    """Each run's total throughput over time, in seconds since its start, and its step curve:
    what the comparison page overlays. Trimmed as the table is: the step curve is the trimmed
    step table, and over time the trimmed periods are gaps (None), listed in ``cuts``. ``by``
    puts the steps against another knob `x` when one is asked for (charts.across_runs)."""
    trim = trim or Trim()
    out, tables = [], []
    for run in runs:
        data = readers.timeline(run)
        origin = run.started_at.timestamp() * 1000 if run.started_at else 0
        cuts = _cuts(run, trim)
        steps = figures(run, trim)["steps"] if trim.active else readers.steps(run)
        out.append(
            {
                "run": run.pk,
                "label": f"{run.campaign.name} #{run.pk}",
                "disturbed": run.disturbed,
                "over_time": [
                    {"x": round((t - origin) / 1000, 1), "y": None if any(lo <= t <= hi for lo, hi in cuts) else v}
                    for t, v in zip(data["times"], data["total"], strict=True)
                ],
                # Seconds since the start; None: to that end of the chart.
                "cuts": [[_since(lo, origin), _since(hi, origin)] for lo, hi in cuts],
                # Each step at the concurrency it achieved, its target for the label.
                "steps": [charts.curve_point(s) for s in steps if s.get("throughput_bps")],
            }
        )
        tables.append((f"{run.campaign.name} #{run.pk}", run.disturbed, RunSpec.of(run), steps))
    result = {"runs": out, "trimmed": trim.active}
    if x != "concurrency":  # against the concurrency, each run's `steps` above are the lines
        result["by"] = {"x": x, "label": sweeps.AXIS_LABELS.get(x, x), "lines": charts.across_runs(tables, x)}
    return result

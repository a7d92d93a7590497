"""Where pages, the API, exports, comparisons and charts read a run's results.

A finished run's results were written once when it ended (finalize) and added to later
(clean-up, retention); they stay valid after retention has deleted the rows they came from.
A run in flight, or one whose driver crashed before writing them, has none: its figures are
computed from its rows now. Each reader makes that choice here, once, so no page can show a
finished run's figures recomputed from rows that may be gone, or a live run's stale ones.

Beside them, what the run page reads of the run itself: its byte budget as frozen, and its
retry chain ("retry failed" re-drives what a run did not succeed at, as a new run linked to
it). Each retry plans exactly the transfers its predecessor did not succeed at, so the runs of
a chain succeed at disjoint sets of the first run's transfers and their counters add up: the
chain's figure needs no transfer row (it stays true after retention).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.cache import cache
from django.db.models import Avg
from django.utils import timezone

from campaigns.models import Run, RunChart, Transfer
from campaigns.results import bucketed, charts, verdicts
from campaigns.results.scope import run_hosts
from campaigns.spec import DEFAULT_BYTE_BUDGET_LABEL, RunSpec
from collectors.models import MetricSample

LIVE_SHARE_SECONDS = 10
# The results' count of transfers never tried that no step needed: the pool a completed sweep of
# time-bounded steps did not reach (the driver adds it when the run ends; campaigns.runs.outcome).
NOT_NEEDED = "not_needed"


def stored(run: Run) -> dict | None:
    """The results written when the run finished, or None (still live, or never written)."""
    summary = run.summary or {}
    return summary if not run.is_live and summary.get("steps") is not None else None


def oldest_in_flight(run: Run, limit: int = 10) -> list[Transfer]:
    """The copies of a live run under way longest, each with its age in seconds: what a hung
    door shows first."""
    rows = list(
        Transfer.objects.filter(run=run, state="active", started_at__isnull=False)
        .only("index", "source", "destination", "size", "attempt", "started_at", "step")
        .order_by("started_at")[:limit]
    )
    now = timezone.now()
    for row in rows:
        row.age_seconds = (now - row.started_at).total_seconds()
    return rows


def file_counts(run: Run) -> dict[str, Any]:
    """How the run's planned transfers stand: ok, failed, skipped (never tried, and a shortfall),
    not_needed (never tried, and no step needed them), cancelled (stopped under way); attempted
    (every copy that started: ok, failed and cancelled) and success_rate, ok over attempted (None
    before any): a copy a cancel stopped did not succeed, a file never started is not counted."""
    not_needed = int((run.summary or {}).get(NOT_NEEDED) or 0)
    attempted = run.files_done + run.files_failed + run.files_cancelled
    return {
        "ok": run.files_done,
        "failed": run.files_failed,
        "skipped": max(run.files_skipped - not_needed, 0),
        "not_needed": not_needed,
        "cancelled": run.files_cancelled,
        "attempted": attempted,
        "success_rate": run.files_done / attempted if attempted else None,
    }


def summary(run: Run) -> dict:
    """The stored summary, or one read now from the run's buckets (without percentiles)."""
    kept = stored(run)
    return kept if kept is not None else _shared_while_live(run, "summary", bucketed.tables)


def steps(run: Run) -> list[dict]:
    """The step table: stored, or read from the run's buckets (without percentiles)."""
    kept = stored(run)
    return kept["steps"] if kept is not None else summary(run)["steps"]


def timeline(run: Run) -> dict:
    """The timeline chart: stored when the run ended, else computed from the rows."""
    if not run.is_live:
        data = RunChart.objects.filter(run=run).values_list("data", flat=True).first()
        return data if data is not None else charts.compute_timeline(run)
    return _shared_while_live(run, "timeline", charts.compute_timeline)


def door_cpu(run: Run) -> dict[str, float | None]:
    """Mean CPU % of each of the run's hosts over its window: frozen by retention before
    the samples went, else averaged from the collectors' samples."""
    frozen = (run.summary or {}).get("door_cpu_percent")
    if frozen is not None:
        return frozen
    if not run.started_at or not run.finished_at:
        return {}
    rows = (
        MetricSample.objects.filter(
            host__in=run_hosts(run), metric="cpu.percent", time__gte=run.started_at, time__lte=run.finished_at
        )
        .values("host__name")
        .annotate(mean=Avg("value"))
    )
    return {row["host__name"]: row["mean"] for row in rows}


def verdict(run: Run, *, recompute: bool = False) -> dict | None:
    """The verdict stored when the run finished; computed now for a run without one (live,
    crashed) or when asked to (a host's link speed may have been set since)."""
    kept = stored(run)
    if kept is not None and not recompute:
        return kept.get("verdict")
    return verdicts.run_verdict(run, summary(run))


def _shared_while_live(run: Run, name: str, compute: Callable[[Run], Any]) -> Any:
    """A live run's figures are read from its buckets: tens of milliseconds, but each viewer of
    a page polls several charts. Every viewer of the same run is answered from one reading for a
    few seconds (in the cache; a finished run's figures are stored instead)."""
    key = f"storageops:run:{run.pk}:{name}"
    data = cache.get(key)
    if data is None:
        data = compute(run)
        cache.set(key, data, LIVE_SHARE_SECONDS)
    return data


# -- the run itself: its byte budget and its retries ----------------------------------------
def byte_budget(run: Run) -> dict[str, Any]:
    """The campaign's own per-run byte budget and the budget this run got, told apart: the
    run may move only the tightest of that and what was left of the daily and weekly ones."""
    spec = RunSpec.of(run)
    return {
        "campaign": spec.campaign_max_bytes,
        "run": spec.max_bytes,
        "label": spec.byte_budget_label,
        "cut": spec.byte_budget_label != DEFAULT_BYTE_BUDGET_LABEL,
    }


_CHAIN_FIELDS = ("pk", "state", "planned_files", "files_done", "files_failed", "files_skipped", "retry_of")


def retry_chain(run: Run) -> dict | None:
    """The chain `run` belongs to, first run first, with the share of the first run's planned
    transfers that succeeded in any of them; None for a run that is no retry and has none."""
    chain = [run]
    while chain[0].retry_of_id:
        chain.insert(0, Run.objects.only(*_CHAIN_FIELDS).get(pk=chain[0].retry_of_id))
    while True:
        following = Run.objects.only(*_CHAIN_FIELDS).filter(retry_of=chain[-1]).order_by("pk").first()
        if following is None:
            break
        chain.append(following)
    if len(chain) == 1:
        return None
    planned = chain[0].planned_files
    done = sum(r.files_done for r in chain)
    return {
        "runs": [
            {"id": r.pk, "state": r.state, "files_done": r.files_done, "planned_files": r.planned_files} for r in chain
        ],
        "planned_files": planned,
        "files_done": done,
        "percent": round(100.0 * done / planned, 1) if planned else 100.0,
        "complete": done >= planned,
    }

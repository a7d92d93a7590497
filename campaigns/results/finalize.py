"""A finished run's results: written once when it ends, added to (never rewritten) later.

`finalize` computes everything a finished run shows and writes it together with the run's
final state in one UPDATE, so no reader ever sees a finished run without its results, or
results of a run still marked live. Whoever has more to say about a finished run later
(clean-up, retention) calls `add`, which sets one section and leaves the others alone.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from campaigns.models import Run
from campaigns.results import analysis, baselines, charts, disturbance, verdicts
from storageops import alerting

# The sections `finalize` computes: `add` may not replace them, or a clean-up report could
# silently overwrite the figures a verdict was read from.
COMPUTED = frozenset(
    {"total", "steps", "destinations", "sources", "doors", "backends", "clients", "door_side", "left_out",
     "disturbance", "verdict", "judgement", "recorded_at", "summary_seconds"}
)  # fmt: skip


def compute_summary(run: Run, now: datetime) -> dict:
    """Totals, steps, endpoints, doors, the disturbance report when disturbed, and the verdict."""
    summary = analysis.run_summary(run)
    if disturbance.refresh_disturbed(run):
        summary["disturbance"] = disturbance.disturbance_report(run)
    summary["verdict"] = verdicts.run_verdict(run, summary, now)
    # Against its own history, as it stood when the run ended (later runs do not rewrite it).
    summary["judgement"] = baselines.judge(run, summary=summary)
    # `now` is when the driver stopped recording transfers: the difference is what closing
    # the run and computing its figures cost.
    summary["recorded_at"] = now.isoformat()
    summary["summary_seconds"] = round((timezone.now() - now).total_seconds(), 3)
    return summary


def finalize(run: Run, *, state: str, reason: str, now: datetime, extras: dict | None = None) -> None:
    """Write a finished run's results once: compute the summary (totals, steps each with its
    concurrency, per endpoint, per door, door_side, disturbance report when disturbed, verdict,
    recorded_at/summary_seconds), merge `extras` (engine extras such as {"fts": {...}}) into it
    under their keys, and write state, finished_at=now, stop_reason=reason[:200], summary,
    active_transfers=0, eta_seconds=None, heartbeat_at=now in ONE update; then store the
    timeline chart (charts.store_timeline)."""
    # The driver has just closed the run's transfers and steps: read its counters afresh.
    run.refresh_from_db()
    summary = compute_summary(run, now)
    for key, value in (extras or {}).items():
        if key in summary:
            raise ValueError(f"Engine extra {key!r} would replace a computed section of the results.")
        summary[key] = value
    final = {
        "state": state,
        "finished_at": now,
        "stop_reason": reason[:200],
        "summary": summary,
        "active_transfers": 0,
        "eta_seconds": None,
        "heartbeat_at": now,
        "stalled_since": None,
    }
    Run.objects.filter(pk=run.pk).update(**final)
    for field, value in final.items():
        setattr(run, field, value)
    # After the update: the chart's window ends at finished_at, and a live run's would not.
    charts.store_timeline(run)
    # A regression, or a scheduled run that lost files, is told to whoever subscribed.
    transaction.on_commit(lambda: alerting.tell("run_finished", run.pk))


def add(run: Run, key: str, value: Any) -> None:
    """Add one section (a clean-up report, retention's frozen figures) to a run's results,
    keeping every other section as it is in the database, whatever `run` holds in memory."""
    if key in COMPUTED:
        raise ValueError(f"{key!r} is computed when the run finishes; it cannot be added.")
    _merge(run, key, value)


def _merge(run: Run, key: str, value: Any) -> None:
    # Read and written under the row's lock: two adds at once (a clean-up requested through the
    # API while retention freezes the run) each keep the other's section.
    with transaction.atomic():
        current = Run.objects.select_for_update().filter(pk=run.pk).values_list("summary", flat=True).get()
        summary = {**(current or {}), key: value}
        Run.objects.filter(pk=run.pk).update(summary=summary)
    run.summary = summary


def set_judgement(run: Run, judgement: dict) -> None:
    """Replace the run's judgement, and nothing else of its results: judging a run again is an
    operator's act (baseline_choice.judge_again), the one exception to results written once."""
    _merge(run, "judgement", judgement)

"""Interim: a finished run's results written in one update (to be results.finalize)."""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone

from campaigns.models import Run
from campaigns.results import analysis, charts, disturbance, verdicts


def write_results(run: Run, *, state: str, reason: str, now: datetime, extras: dict) -> None:
    summary = analysis.run_summary(run)
    if disturbance.refresh_disturbed(run):
        summary["disturbance"] = disturbance.disturbance_report(run)
    summary["verdict"] = verdicts.run_verdict(run, summary, now)
    summary.update(extras)
    # When the last transfer record was committed, apart from the summary's own cost.
    summary["recorded_at"] = now.isoformat()
    summary["summary_seconds"] = round((timezone.now() - now).total_seconds(), 3)
    Run.objects.filter(pk=run.pk).update(
        state=state,
        finished_at=now,
        stop_reason=reason[:200],
        summary=summary,
        active_transfers=0,
        eta_seconds=None,
        heartbeat_at=now,
    )
    run.refresh_from_db()
    charts.store_timeline(run)

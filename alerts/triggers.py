"""What deserves an alert: a finished run that regressed against its history, a scheduled run
that did not finish every transfer, a stall."""

from __future__ import annotations

from django.conf import settings

from alerts import delivery
from alerts.models import AlertKind
from campaigns.models import Run


def _link(run: Run) -> str:
    return f"{settings.STORAGEOPS_BASE_URL}{run.get_absolute_url()}"


def run_finished(run: Run) -> list:
    """The alerts a run that just ended calls for (none for a quiet, successful one)."""
    sent = []
    judgement = (run.summary or {}).get("judgement") or {}
    if judgement.get("status") == "regressed":
        suspects = [f"- {e['time'][:16]} {e['kind']} on {e['where']}: {e['summary']}" for e in judgement["suspects"]]
        lines = [judgement["headline"]]
        if suspects:
            lines += ["Changed since the last run within its band:", *suspects]
        sent += delivery.notify(
            AlertKind.REGRESSION, f"{run} regressed", "\n".join([*lines, _link(run)]), campaign=run.campaign, run=run
        )
    if run.trigger == "schedule" and run.state in ("partial", "failed"):
        counts = f"{run.files_done} of {run.planned_files} transfers succeeded, {run.files_failed} failed"
        sent += delivery.notify(
            AlertKind.RUN_FAILED, f"Scheduled run {run} ended {run.state}",
            f"{counts}; {run.stop_reason or run.error or 'no reason given'}\n{_link(run)}",
            campaign=run.campaign, run=run,
        )  # fmt: skip
    return sent


def run_stalled(run: Run, summary: str) -> list:
    return delivery.notify(
        AlertKind.STALL, f"{run} stalled", f"{summary}\n{_link(run)}", campaign=run.campaign, run=run
    )

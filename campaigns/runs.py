"""The run lifecycle: create, dispatch, lease, cancel, recover.

The database is the source of truth. A run is driven by whichever worker holds its
lease (executor + heartbeat); a driver that goes silent for longer than the lease
loses the run to the next worker that asks, which resumes it from its rows alone.
"""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import uuid
from datetime import timedelta
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from campaigns.budgets import tightest_budget
from campaigns.choices import ACTIVE_RUN_STATES, CampaignKind, RunState
from campaigns.engines.gfal2_engine import gfal2_version
from campaigns.models import Campaign, Run
from campaigns.planning import campaign_snapshot
from collectors.events import log_event
from storageops.version import full_version


def executor_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def check_runnable(campaign: Campaign) -> None:
    errors = []
    if campaign.kind in (CampaignKind.TRANSFER, CampaignKind.CHECKSUM_LOAD):
        if not campaign.sources.exists():
            errors.append("The campaign has no source endpoint.")
        if campaign.kind == CampaignKind.TRANSFER and not campaign.destinations.exists():
            errors.append("The campaign has no destination endpoint.")
    if campaign.engine == "fts" and not campaign.fts_instance_id:
        errors.append("An FTS campaign needs an FTS instance.")
    if errors:
        raise ValidationError(errors)


def create_run(campaign: Campaign, *, user=None, trigger: str = "web") -> Run:
    """Freeze the campaign into a pending run (not yet dispatched)."""
    campaign.full_clean()
    check_runnable(campaign)
    snapshot = campaign_snapshot(campaign)
    budget = tightest_budget(campaign)
    if budget is not None:
        if budget.remaining <= 0:
            raise ValidationError(
                f"The campaign's {budget.label} is used up ({budget.used} of {budget.limit} bytes moved)."
            )
        # The run stops cleanly at what is left of the tightest budget, and says which one.
        snapshot["parameters"]["max_bytes"] = budget.remaining
        snapshot["parameters"]["byte_budget_label"] = budget.label
    return Run.objects.create(
        campaign=campaign,
        trigger=trigger,
        created_by=user if user and user.is_authenticated else None,
        snapshot=snapshot,
        planned_files=campaign.planned_files,
        planned_bytes=campaign.planned_bytes,
    )


def start_run(campaign: Campaign, *, user=None, trigger: str = "web") -> Run:
    """Create a run and hand it to a transfers worker once the transaction commits."""
    with transaction.atomic():
        run = create_run(campaign, user=user, trigger=trigger)
        transaction.on_commit(lambda: dispatch(run.pk))
    return run


def dispatch(run_id: int, countdown: float = 0) -> None:
    from campaigns.tasks import drive_fts_run, drive_run

    # FTS runs only talk to FTS and the database: they belong on the control queue.
    engine = Run.objects.filter(pk=run_id).values_list("snapshot__parameters__engine", flat=True).first()
    task = drive_fts_run if engine == "fts" else drive_run
    task.apply_async((run_id,), countdown=countdown)


def request_cancel(run: Run, *, user=None) -> bool:
    """Ask the driver to stop; a run no driver has touched yet is cancelled at once."""
    now = timezone.now()
    untouched = Run.objects.filter(pk=run.pk, state=RunState.PENDING, executor="").update(
        state=RunState.CANCELLED, cancel_requested_at=now, finished_at=now, stop_reason="cancelled before start"
    )
    if not untouched:
        changed = Run.objects.filter(pk=run.pk, state__in=[RunState.PENDING, RunState.RUNNING]).update(
            state=RunState.CANCELLING, cancel_requested_at=now
        )
        if not changed:
            return False
    run.refresh_from_db()
    log_event(
        "note", f"Cancel requested for run {run}", source="operator" if user else "storageops", run=run, user=user
    )
    return True


def current_state(run_id: int) -> str | None:
    return Run.objects.filter(pk=run_id).values_list("state", flat=True).first()


# -- leases ---------------------------------------------------------------------------------
def _lease_cutoff():
    return timezone.now() - timedelta(seconds=settings.STORAGEOPS_RUN_LEASE_SECONDS)


def acquire_lease(run_id: int, executor: str) -> bool:
    """Take the run if nobody holds a fresh lease on it (a conditional UPDATE: no locks)."""
    return bool(
        Run.objects.filter(pk=run_id, state__in=ACTIVE_RUN_STATES)
        .filter(Q(executor="") | Q(heartbeat_at__lt=_lease_cutoff()) | Q(executor=executor))
        .update(executor=executor, heartbeat_at=timezone.now())
    )


def renew_lease(run_id: int, executor: str, **fields) -> bool:
    """Heartbeat (and progress fields); False means another driver took the run over."""
    return bool(Run.objects.filter(pk=run_id, executor=executor).update(heartbeat_at=timezone.now(), **fields))


def stale_run_ids() -> list[int]:
    """Runs that should be moving but whose driver is silent (or that no driver picked up)."""
    cutoff = _lease_cutoff()
    return list(
        Run.objects.filter(state__in=ACTIVE_RUN_STATES)
        .filter(Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, created__lt=cutoff))
        .values_list("pk", flat=True)
    )


def recover_stale_runs() -> list[int]:
    ids = stale_run_ids()
    for run_id in ids:
        dispatch(run_id)
    return ids


# -- versions -------------------------------------------------------------------------------
def xrootd_server_version(url: str, timeout: float = 5.0) -> str:
    """Ask an XRootD door its version (`xrdfs host query config version`); '' if it won't say."""
    parts = urlsplit(url)
    if parts.scheme not in ("root", "roots", "xroot") or not parts.hostname:
        return ""
    address = f"{parts.hostname}:{parts.port or 1094}"
    try:
        out = subprocess.run(
            ["xrdfs", address, "query", "config", "version"],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def collect_versions(snapshot: dict) -> dict:
    endpoints = {ep["url"]: ep for ep in [*snapshot["sources"], *snapshot["destinations"]]}
    return {
        "storageops": full_version(),
        "gfal2": gfal2_version(),
        "python": platform.python_version(),
        "endpoints": {ep["name"]: xrootd_server_version(url) for url, ep in endpoints.items()},
    }

"""Starting and stopping runs from the outside: freeze a campaign into a run, hand it to a
worker, ask it to cancel. The database is the source of truth; the driver (lifecycle) does
the rest under its lease.
"""

from __future__ import annotations

import getpass
from typing import TYPE_CHECKING

from celery import current_app
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from campaigns.choices import CampaignKind, RunState
from campaigns.models import Campaign, Run, campaign_rules
from campaigns.models.engine_registry import drive_task, engine
from campaigns.runs.budgets import tightest_budget
from campaigns.runs.planning import campaign_snapshot, planned_totals
from collectors.events import log_event

if TYPE_CHECKING:
    from django.contrib.auth.base_user import AbstractBaseUser
    from django.contrib.auth.models import AnonymousUser

    AnyUser = AbstractBaseUser | AnonymousUser

# Tasks are sent by name (each engine's registry entry names its drive task): the services
# that start runs never import the task module, which imports the driver, which imports these.


_START_LABELS = {"source_path": "The source path: ", "destination_path": "The destination path: "}


def check_runnable(campaign: Campaign) -> None:
    errors = []
    if campaign.kind in (CampaignKind.TRANSFER, CampaignKind.CHECKSUM_LOAD):
        if not campaign.sources.exists():
            errors.append("The campaign has no source endpoint.")
        if campaign.kind == CampaignKind.TRANSFER and not campaign.destinations.exists():
            errors.append("The campaign has no destination endpoint.")
    errors += engine(campaign.engine).runnable_errors(campaign)
    # The campaign's rules against its endpoints and clients again at start (campaign_rules, as the
    # form and the API check them): an endpoint edited since may give its copy modes no more, an
    # endpoint row may predate the one path rule, a folder became a link.
    relations = campaign_rules.Relations.saved(campaign)
    for name, problem in campaign_rules.relation_errors(campaign, relations).items():
        if name != "destinations":  # said above
            errors.append(f"{_START_LABELS.get(name, '')}{problem}")
    chosen = [*relations.sources, *relations.destinations]
    on_issuer = sorted({ep.name for ep in chosen if ep.token_issuer_id})
    if on_issuer and campaign.clients.exists():
        errors.append(f"{', '.join(on_issuer)} take tokens from an issuer, which do not reach a client pool's hosts "
                      "yet: run this campaign without a client pool.")  # fmt: skip
    if errors:
        raise ValidationError(errors)


def starter_name(user: AnyUser | None = None, by: str = "") -> str:
    """The words a run keeps for who started it: the user's name (a signed-in operator, an API
    token's owner), else `by` (a schedule, a command). Words, so the run still says who after
    the user or the schedule is deleted."""
    name = user.get_username() if user is not None and user.is_authenticated else by
    return name[: Run._meta.get_field("started_by_name").max_length]


def command_starter(command: str) -> str:
    """`by` for a run a management command starts: the command, and the shell login that ran
    it when there is one (a container may have no name for its uid)."""
    try:
        login = getpass.getuser()
    except (OSError, KeyError):
        return f"manage.py {command}"
    return f"manage.py {command} ({login})"


def create_run(campaign: Campaign, *, user: AnyUser | None = None, by: str = "", trigger: str = "web") -> Run:
    """Freeze the campaign into a pending run (not yet dispatched)."""
    campaign.full_clean()
    check_runnable(campaign)
    return new_run(campaign, campaign_snapshot(campaign), user=user, by=by, trigger=trigger)


def new_run(
    campaign: Campaign,
    snapshot: dict,
    *,
    user: AnyUser | None = None,
    by: str = "",
    trigger: str = "web",
    retry_of: Run | None = None,
) -> Run:
    """A pending run of `campaign` frozen as `snapshot`, with the byte budget any new run gets
    now (create_run, and retry_failed with the snapshot of the run it retries). `user` started
    it, or else `by` says what did (starter_name)."""
    snapshot = {key: value for key, value in snapshot.items() if key != "budget"}
    budget = tightest_budget(campaign)
    if budget is not None:
        if budget.remaining <= 0:
            raise ValidationError(
                f"The campaign's {budget.label} is used up ({budget.used} of {budget.limit} bytes moved)."
            )
        # The run stops cleanly at what is left of the tightest budget, and says which one.
        # Kept beside the campaign's own parameters, which stay as the campaign had them.
        snapshot["budget"] = {"max_bytes": budget.remaining, "label": budget.label}
    planned_files, planned_bytes = planned_totals(snapshot)
    return Run.objects.create(
        campaign=campaign,
        trigger=trigger,
        started_by=user if user and user.is_authenticated else None,
        started_by_name=starter_name(user, by),
        snapshot=snapshot,
        planned_files=planned_files,
        planned_bytes=planned_bytes,
        retry_of=retry_of,
    )


def start_run(campaign: Campaign, *, user: AnyUser | None = None, by: str = "", trigger: str = "web") -> Run:
    """Create a run and hand it to a transfers worker once the transaction commits."""
    with transaction.atomic():
        run = create_run(campaign, user=user, by=by, trigger=trigger)
        transaction.on_commit(lambda: dispatch(run.pk))
    return run


def dispatch(run_id: int, countdown: float = 0) -> None:
    # Each engine names its driver task (FTS its own); CELERY_TASK_ROUTES sends them all to "transfers".
    name = Run.objects.filter(pk=run_id).values_list("snapshot__parameters__engine", flat=True).first()
    current_app.send_task(drive_task(name), (run_id,), countdown=countdown)


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

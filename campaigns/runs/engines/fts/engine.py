"""The FTS engine's entry in the engine registry: FTS3's scheduler copies on its own nodes,
StorageOps submits, polls and records (docs/fts.md)."""

from __future__ import annotations

from campaigns import choices
from campaigns.models import Campaign, Run
from campaigns.models.engine_registry import EngineEntry, register_engine
from campaigns.runs.engines.fts.errors import categorize_fts
from campaigns.runs.engines.fts.executor import FtsExecutor, build_client
from campaigns.runs.engines.fts.snapshot import fts_snapshot

NAME = "fts"
DRIVE_TASK = "campaigns.drive_fts_run"  # on "control": the driver waits on FTS, it copies nothing


def categorize(code: int | None, message: str) -> str:
    """An FTS file reason onto ErrorCategory (FTS writes gfal2's errno into the reason)."""
    return categorize_fts(message)[0]


def build_executor(run: Run, executor_id: str, copier_factory=None) -> FtsExecutor:
    return FtsExecutor(run, build_client(run.snapshot), executor_id=executor_id)


def campaign_errors(campaign: Campaign) -> dict[str, str]:
    """What a campaign run by FTS may not ask for: FTS's own scheduler decides how copies run."""
    errors: dict[str, str] = {}
    if campaign.tpc_mode == choices.TpcMode.STREAMED:
        errors["tpc_mode"] = "FTS does third-party copies; streamed mode needs the gfal2 engine."
    if campaign.start_together:
        errors["start_together"] = "FTS's scheduler starts copies itself: starting together needs the gfal2 engine."
    if not campaign.fts_instance_id:
        errors["fts_instance"] = "Choose the FTS instance that runs this campaign's transfers."
    if isinstance(campaign.sweep, dict) and "tpc_mode" in campaign.sweep:
        errors.setdefault("sweep", "FTS chooses its copy mode itself: sweeping tpc_mode needs the gfal2 engine.")
    return errors


def runnable_errors(campaign: Campaign) -> list[str]:
    return [] if campaign.fts_instance_id else ["An FTS campaign needs an FTS instance."]


def snapshot_extras(campaign: Campaign) -> dict:
    return {"fts": fts_snapshot(campaign.fts_instance)} if campaign.fts_instance_id else {}


ENTRY = register_engine(
    EngineEntry(
        name=NAME,
        label="FTS3",
        build_executor=build_executor,
        drive_task=DRIVE_TASK,
        option_fields=("fts_instance", "fts_priority", "fts_strict_copy"),
        campaign_errors=campaign_errors,
        runnable_errors=runnable_errors,
        snapshot_extras=snapshot_extras,
        categorize=categorize,
        client_pool=False,
        results_template="campaigns/partials/run_fts.html",
    )
)

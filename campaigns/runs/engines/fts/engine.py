"""The FTS engine's entry in the engine registry: FTS3's scheduler copies on its own nodes,
StorageOps submits, polls and records (docs/fts.md)."""

from __future__ import annotations

from campaigns import choices
from campaigns.models import Campaign, Run
from campaigns.models.engine_registry import EngineEntry, register_engine
from campaigns.runs.engines.fts.errors import categorize_fts
from campaigns.runs.engines.fts.executor import FtsExecutor, build_client
from campaigns.runs.engines.fts.models import FtsInstance
from campaigns.runs.engines.fts.options import FtsOptions, FtsOptionsForm
from campaigns.runs.engines.fts.snapshot import fts_snapshot

NAME = "fts"
DRIVE_TASK = "campaigns.drive_fts_run"  # on "transfers", as every run's driver: it waits on FTS all run


def categorize(code: int | None, message: str) -> str:
    """An FTS file reason onto ErrorCategory (FTS writes gfal2's errno into the reason)."""
    return categorize_fts(message)[0]


def build_executor(run: Run, lease_holder: str, copier_factory=None) -> FtsExecutor:
    storage = None
    if copier_factory is not None:
        made: list = []

        def storage():  # built on first use: most runs never cancel a copy FTS had started
            if not made:
                made.append(copier_factory(run.snapshot))
            return made[0]

    options = FtsOptions.of(run.snapshot)
    return FtsExecutor(run, build_client(options), lease_holder=lease_holder, storage=storage, fts_options=options)


def campaign_errors(campaign: Campaign) -> dict[str, str]:
    """What a campaign run by FTS may not ask for: FTS's own scheduler decides how copies run."""
    errors: dict[str, str] = {}
    if campaign.tpc_mode == choices.TpcMode.STREAMED:
        errors["tpc_mode"] = "FTS does third-party copies; streamed mode needs the gfal2 engine."
    elif campaign.tpc_mode != choices.TpcMode.AUTO:
        # An FTS job has no field for pull or push: FTS's own configuration decides, and its
        # transfers say nothing of the mode, so a campaign asking one would record a mode unproven.
        errors["tpc_mode"] = (
            f"FTS chooses third-party pull or push itself (its link and storage configuration): a job cannot ask "
            f"for {campaign.tpc_mode}. Choose auto, or the gfal2 engine to ask for a mode."
        )
    if campaign.start_together:
        errors["start_together"] = "FTS's scheduler starts copies itself: starting together needs the gfal2 engine."
    if (campaign.engine_options or {}).get("measure_files") and not campaign.step_files:
        errors["engine_options"] = "measure_files: counts a step's files: give the campaign steps of step_files files."
    if isinstance(campaign.sweep, dict) and "tpc_mode" in campaign.sweep:
        errors.setdefault("sweep", "FTS chooses its copy mode itself: sweeping tpc_mode needs the gfal2 engine.")
    return errors


def _instance(campaign: Campaign) -> FtsInstance | None:
    instance_id = (campaign.engine_options or {}).get("instance")
    return FtsInstance.objects.filter(pk=instance_id).first() if instance_id else None


def runnable_errors(campaign: Campaign) -> list[str]:
    # The options were valid when saved; the instance may have gone since (deleting one in use is refused).
    return [] if _instance(campaign) else ["An FTS campaign needs an FTS instance."]


def snapshot_extras(campaign: Campaign) -> dict:
    instance = _instance(campaign)
    return {"fts": fts_snapshot(instance)} if instance else {}


ENTRY = register_engine(
    EngineEntry(
        name=NAME,
        label="FTS3",
        build_executor=build_executor,
        drive_task=DRIVE_TASK,
        options_form=FtsOptionsForm,
        campaign_errors=campaign_errors,
        runnable_errors=runnable_errors,
        snapshot_extras=snapshot_extras,
        categorize=categorize,
        client_pool=False,
        results_template="fts/run.html",
        # Campaign fields of their own until migration campaigns 0016 moved them into engine_options.
        retired_fields=(("fts_instance", "instance"), ("fts_priority", "priority"), ("fts_strict_copy", "strict_copy")),
    )
)

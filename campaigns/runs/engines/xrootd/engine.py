"""The xrootd engine's entry in the engine registry: copies made by XRootD's own client (XrdCl's
CopyProcess, what xrdcp runs) in the driving worker's copy threads (docs/xrootd-engine.md)."""

from __future__ import annotations

from campaigns import choices
from campaigns.models import Campaign, Run
from campaigns.models.engine_registry import EngineEntry, register_engine
from campaigns.runs.engines.copies import CopyOptions
from campaigns.runs.engines.errors import categorize
from campaigns.runs.engines.xrootd.client import XRootDCopier
from campaigns.runs.engines.xrootd.modes import mode_error
from campaigns.runs.engines.xrootd.options import XRootDOptions, XRootDOptionsForm
from campaigns.runs.executors.in_process import CopyThreadsExecutor
from campaigns.spec import RunSpec

NAME = "xrootd"


def build_copier(run: Run) -> XRootDCopier:
    spec = RunSpec.of(run)
    return XRootDCopier(CopyOptions.from_spec(spec), XRootDOptions.from_engine_options(spec.engine_options))


def build_executor(run: Run, lease_holder: str, copier_factory=None) -> CopyThreadsExecutor:
    # copier_factory is gfal2's, which the lifecycle keeps for sources and clean-up: not these copies.
    return CopyThreadsExecutor(run, build_copier(run), lease_holder=lease_holder)


def campaign_errors(campaign: Campaign) -> dict[str, str]:
    """What XrdCl has no knob for, per copy or at all."""
    errors: dict[str, str] = {}
    if campaign.kind != choices.CampaignKind.TRANSFER:
        errors["kind"] = "The xrootd engine copies files: a checksum load needs the gfal2 engine."
    if campaign.tcp_buffer_size:
        errors["tcp_buffer_size"] = "XrdCl sets no TCP buffer per copy: leave it at 0 (the system's), or use gfal2."
    swept = set(campaign.sweep) if isinstance(campaign.sweep, dict) else set()
    # Streams are XrdCl's substreams per connection to a door, one connection for every copy of
    # the process: a step cannot have its own while the last step's copies still run on it.
    for axis in sorted(swept & {"streams", "tcp_buffer_size"}):
        errors.setdefault("sweep", f"The xrootd engine cannot sweep {axis}: sweep tpc_mode or file_size instead.")
    return errors


def runnable_errors(campaign: Campaign) -> list[str]:
    # XrdCl reads a token or a proxy from the process's environment, not per endpoint.
    endpoints = [*campaign.sources.all(), *campaign.destinations.all()]
    named = sorted({ep.name for ep in endpoints if ep.bearer_token or ep.x509_proxy})
    if named:
        return [f"The xrootd engine copies without per-endpoint credentials; {', '.join(named)} carry some: use gfal2."]
    return []


ENTRY = register_engine(
    EngineEntry(
        name=NAME,
        label="XRootD (xrdcp)",
        build_executor=build_executor,
        options_form=XRootDOptionsForm,
        campaign_errors=campaign_errors,
        runnable_errors=runnable_errors,
        categorize=categorize,
        # The client pool's hosts copy with gfal2 (campaigns.runs.client_pool.serve).
        client_pool=False,
        sweepable=frozenset({"tpc_mode", "file_size"}),
        copy_mode_error=mode_error,
    )
)

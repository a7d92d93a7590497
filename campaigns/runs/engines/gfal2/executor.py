"""gfal2's copier for a run (copies or, for a checksum-load campaign, checksum requests), with the
endpoints' secrets; the copy threads that run it are every in-process engine's
(campaigns.runs.executors.in_process)."""

from __future__ import annotations

from campaigns.choices import CampaignKind
from campaigns.runs.engines.copies import CopyOptions
from campaigns.runs.engines.gfal2.checksum import Gfal2Checksummer
from campaigns.runs.engines.gfal2.client import Gfal2Copier
from campaigns.runs.storage import run_credentials
from campaigns.spec import RunSpec


def build_copier(snapshot: dict) -> Gfal2Copier:
    """The gfal2 engine for a run; secrets are read from the database now, never from the snapshot."""
    credentials = list(run_credentials(snapshot))
    spec = RunSpec.from_snapshot(snapshot)
    engine = Gfal2Checksummer if spec.kind == CampaignKind.CHECKSUM_LOAD else Gfal2Copier
    return engine(CopyOptions.from_spec(spec), credentials)

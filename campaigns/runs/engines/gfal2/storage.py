"""gfal2 as the site's storage library (campaigns.runs.storage): registered when the campaigns
app is ready, it answers every stat, listing, write, delete and checksum around a run."""

from __future__ import annotations

from campaigns.runs import storage
from campaigns.runs.engines.gfal2.client import Gfal2Copier, gfal2_version
from campaigns.runs.engines.gfal2.executor import build_copier

LIBRARY = storage.register(
    storage.Library(name="gfal2", open=Gfal2Copier, for_run=build_copier, versions=lambda: {"gfal2": gfal2_version()})
)

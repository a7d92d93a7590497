"""Freeze a campaign into a run snapshot, and expand the snapshot into the file plan.

The plan is a pure function of the snapshot and the run id, so a resumed run, a
report and a reproduction all see the same files in the same order.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.forms.models import model_to_dict

from campaigns.choices import CampaignKind
from campaigns.models import Campaign, Endpoint
from campaigns.models.engine_registry import engine
from campaigns.spec import PARAMETER_NAMES, RunSpec

PARAMETER_FIELDS = PARAMETER_NAMES  # what a snapshot freezes of a campaign: the RunSpec's fields
_SECRET_FIELDS = ("bearer_token",)


def endpoint_snapshot(endpoint: Endpoint) -> dict:
    data = model_to_dict(endpoint, exclude=[*_SECRET_FIELDS, "hosts"])
    data["protocol"] = endpoint.protocol
    # A token is presented either way; an issuer's are the run's own and never in the snapshot.
    data["has_token"] = bool(endpoint.bearer_token or endpoint.token_issuer_id)
    data["backend_name"] = endpoint.backend.name
    data["hosts"] = [{"id": h.pk, "name": h.name, "address": h.address, "role": h.role} for h in endpoint.hosts.all()]
    return data


def campaign_snapshot(campaign: Campaign) -> dict:
    """Everything a run needs to execute and explain itself, secrets left out."""
    sources = list(campaign.sources.select_related("backend").prefetch_related("hosts").order_by("pk"))
    destinations = list(campaign.destinations.select_related("backend").prefetch_related("hosts").order_by("pk"))
    backends = {ep.backend_id: ep.backend for ep in [*sources, *destinations]}
    snapshot = {
        "campaign_id": campaign.pk,
        "parameters": {name: getattr(campaign, name) for name in PARAMETER_FIELDS},
        "sources": [endpoint_snapshot(ep) for ep in sources],
        "destinations": [endpoint_snapshot(ep) for ep in destinations],
        "backends": [model_to_dict(b) for b in backends.values()],
        # The client pool that shares the copies: which hosts, each with its weight.
        "clients": [{"name": h.name, "weight": h.client_weight} for h in campaign.clients.order_by("name")],
    }
    # What the run freezes of its engine beside the parameters (FTS: how its instance was reached).
    snapshot.update(engine(campaign.engine).snapshot_extras(campaign))
    return snapshot


@dataclass(frozen=True, slots=True)
class PlannedTransfer:
    index: int
    source: str
    destination: str
    size: int
    source_endpoint_id: int
    destination_endpoint_id: int
    checksum: str = ""  # the source's checksum, when known per file (existing data)


def file_sizes(spec: RunSpec, seed: int) -> list[int]:
    """Sizes in plan order; a mix is shuffled (seeded) so every step sees every size. A sweep of
    file sizes plans each step's files at its step's size, in step order (steps bounded by files
    claim the plan in order: a step's files are exactly its own)."""
    if "file_size" in spec.sweep and spec.step_files:
        return [point.file_size for point in spec.points for _ in range(spec.step_files)]
    if not spec.file_mix:
        return [spec.file_size] * spec.file_count
    sizes = [size for count, size in spec.file_mix for _ in range(count)]
    random.Random(seed).shuffle(sizes)
    return sizes


def source_path(folder: str, size: int, number: int) -> str:
    """Where source number `number` of `size` bytes lies below `folder` (the campaign's source
    folder, or for generated sources the seed run's folder below it: sources_folder)."""
    return f"{folder.strip('/')}/{size}/src-{number:07d}"


def sources_folder(spec: RunSpec, seed: int) -> str:
    """The folder of a plan's source files below each source endpoint.

    Generated sources get a folder of their own per plan, named for the run that seeded it:
    two runs of a campaign at once never write (or read while the other writes) the same file,
    which XRootD refuses ("already opened"), and a retry reads the sources of the run it
    retries. Sources StorageOps does not create lie where the campaign says, shared by its runs.
    """
    if spec.create_sources:
        return f"{spec.source_path.strip('/')}/run-{seed}-sources"
    return spec.source_path


def run_folder(spec: RunSpec, run_id: int) -> str:
    """The folder below each written endpoint that holds a run's files, and nothing else."""
    return f"{spec.destination_path.strip('/')}/run-{run_id}"


def destination_path(spec: RunSpec, run_id: int, index: int) -> str:
    return f"{run_folder(spec, run_id)}/f{index:07d}"


def endpoint_folder_url(endpoint: dict, folder: str) -> str:
    """URL of `folder` below an endpoint's prefix, without the endpoint's query."""
    return _UrlMaker(endpoint).head + folder.strip("/") + "/"


class _UrlMaker:
    """Builds transfer URLs below one endpoint; the prefix is parsed once, not per file."""

    def __init__(self, endpoint: dict) -> None:
        parts = urlsplit(endpoint["url"])
        base = parts.path if parts.path.endswith("/") else parts.path + "/"
        self.head = f"{parts.scheme}://{parts.netloc}{base}"
        self.query = parts.query
        self.mock = endpoint["protocol"] == "mock"

    def __call__(self, path: str, size: int) -> str:
        url = self.head + path.lstrip("/")
        query = self.query
        if self.mock:
            # mock:// takes the file's size from the URL.
            query = f"{query}&size={size}" if query else f"size={size}"
        return f"{url}?{query}" if query else url


def plan(snapshot: dict, run_id: int) -> Iterator[PlannedTransfer]:
    """The run's transfers: sources and destinations taken in turn, direction applied.

    A retry (snapshot["retry"]) plans only the indices it re-drives, each with the source and
    size it had in the run it retries; its destinations are below its own run folder."""
    spec = RunSpec.from_snapshot(snapshot)
    if spec.retry is None:
        yield from _full_plan(spec, snapshot, run_id, seed=run_id)
        return
    wanted = set(spec.retry.indices)
    yield from (t for t in _full_plan(spec, snapshot, run_id, seed=spec.retry.seed) if t.index in wanted)


def _sizes(spec: RunSpec, snapshot: dict, seed: int) -> list[int]:
    """Sizes in plan order: the listed files' for existing data (none before they are listed)."""
    if spec.source_listing:
        return [entry["size"] for entry in snapshot.get("listing", [])]
    return file_sizes(spec, seed=seed)


def planned_indices(snapshot: dict) -> list[int]:
    """The indices a run of this snapshot plans, in order."""
    spec = RunSpec.from_snapshot(snapshot)
    if spec.retry is not None:
        return sorted(spec.retry.indices)
    return list(range(len(_sizes(spec, snapshot, seed=0))))


def planned_totals(snapshot: dict) -> tuple[int, int]:
    """Files and bytes a run of this snapshot plans (whatever its run id: the seed only orders a mix)."""
    spec = RunSpec.from_snapshot(snapshot)
    if spec.retry is None:
        sizes = _sizes(spec, snapshot, seed=0)
        return len(sizes), sum(sizes)
    sizes = _sizes(spec, snapshot, seed=spec.retry.seed)
    return len(spec.retry.indices), sum(sizes[i] for i in spec.retry.indices)


def _full_plan(spec: RunSpec, snapshot: dict, run_id: int, seed: int) -> Iterator[PlannedTransfer]:
    sources, destinations = snapshot["sources"], snapshot["destinations"]
    if spec.kind == CampaignKind.CHECKSUM_LOAD:
        yield from _checksum_plan(spec, sources, run_id, seed)
        return
    if spec.source_listing:
        yield from _listing_plan(spec, snapshot, run_id)
        return
    makers = {ep["id"]: _UrlMaker(ep) for ep in [*sources, *destinations]}
    distinct = spec.source_file_count
    folder = sources_folder(spec, seed)
    for index, size in enumerate(file_sizes(spec, seed=seed)):
        src, dst = sources[index % len(sources)], destinations[index % len(destinations)]
        direction = spec.direction
        if direction == "reverse" or (direction == "both" and index % 2):
            src, dst = dst, src
        number = index % distinct if distinct else index
        yield PlannedTransfer(
            index=index,
            source=makers[src["id"]](source_path(folder, size, number), size),
            destination=makers[dst["id"]](destination_path(spec, run_id, index), size),
            size=size,
            source_endpoint_id=src["id"],
            destination_endpoint_id=dst["id"],
        )


def _listing_plan(spec: RunSpec, snapshot: dict, run_id: int) -> Iterator[PlannedTransfer]:
    """Existing data: each listed file copied once, in listing order, to the destinations in
    turn (below this run's own folder), with the checksum the storage gave for it."""
    destinations = snapshot["destinations"]
    makers = {ep["id"]: _UrlMaker(ep) for ep in destinations}
    for index, entry in enumerate(snapshot["listing"]):
        dst = destinations[index % len(destinations)]
        yield PlannedTransfer(
            index=index,
            source=entry["url"],
            destination=makers[dst["id"]](destination_path(spec, run_id, index), entry["size"]),
            size=entry["size"],
            source_endpoint_id=entry["endpoint"],
            destination_endpoint_id=dst["id"],
            checksum=entry.get("checksum", ""),
        )


def _checksum_plan(spec: RunSpec, sources: list[dict], run_id: int, seed: int) -> Iterator[PlannedTransfer]:
    """One checksum request per row: the file asked about, no destination, the same door answering."""
    makers = {ep["id"]: _UrlMaker(ep) for ep in sources}
    distinct = spec.source_file_count
    folder = sources_folder(spec, seed)
    for index, size in enumerate(file_sizes(spec, seed=seed)):
        src = sources[index % len(sources)]
        number = index % distinct if distinct else index
        yield PlannedTransfer(
            index=index,
            source=makers[src["id"]](source_path(folder, size, number), size),
            destination="",
            size=size,
            source_endpoint_id=src["id"],
            destination_endpoint_id=src["id"],
        )


def source_files(snapshot: dict, run_id: int) -> dict[str, int]:
    """Distinct source URLs of the plan and their sizes (what create_sources uploads)."""
    return {t.source: t.size for t in plan(snapshot, run_id)}

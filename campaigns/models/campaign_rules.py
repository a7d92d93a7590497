"""What makes a campaign valid: one place for its rules, one message per field.

`field_errors`: the rules of its own values (the model's clean, so every save path checks them).
`relation_errors`: the rules against the endpoints and clients it is about to have (copy modes
the engine can make between them, its folders below them, listed URLs on its sources, a client
pool its engine can use), checked by the form, the API and the admin with the relations they
are about to save, since a campaign's many-to-many fields are set only after it is. The engine's
rules and the sweep's plug in here (engine_rules, sweep_rules).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.conf import settings

from campaigns import choices
from campaigns.models import engine_rules, sweep_rules
from storageops.validators import check_source_urls, folder_errors


@dataclass(frozen=True)
class Relations:
    """The endpoints and client hosts a campaign has, or is about to have."""

    sources: Sequence
    destinations: Sequence
    clients: Sequence = ()

    @classmethod
    def saved(cls, campaign) -> Relations:
        if not campaign.pk:
            return cls((), (), ())
        return cls(list(campaign.sources.all()), list(campaign.destinations.all()), list(campaign.clients.all()))


def errors(campaign, relations: Relations) -> dict[str, str]:
    """Every rule: the fields' own, then those against the relations where the field is not wrong already."""
    found = field_errors(campaign)
    for name, problem in relation_errors(campaign, relations).items():
        found.setdefault(name, problem)
    return found


def relation_errors(campaign, relations: Relations) -> dict[str, str]:
    """Field errors of a campaign against the endpoints and clients it is about to have."""
    found: dict[str, str] = {}
    if problem := engine_rules.client_pool_error(campaign.engine, relations.clients):
        found["clients"] = problem
    if campaign.kind == choices.CampaignKind.TRANSFER and not relations.destinations:
        found["destinations"] = "A transfer campaign needs at least one destination."
    if relations.sources or relations.destinations:
        problem = engine_rules.copy_mode_error(
            campaign.engine, campaign.kind, campaign.tpc_mode, campaign.sweep, campaign.direction,
            relations.sources, relations.destinations,
        )  # fmt: skip
        if problem:
            found["tpc_mode"] = problem
    folders = {name: getattr(campaign, name) for name in ("source_path", "destination_path") if getattr(campaign, name)}
    urls = [ep.url for ep in (*relations.sources, *relations.destinations)]
    found.update(folder_errors(folders, urls))
    if campaign.source_listing == choices.SourceListing.URLS and relations.sources:
        problem = check_source_urls(
            campaign.source_urls or "", [ep.url for ep in relations.sources], settings.STORAGEOPS_MAX_LISTED_SOURCES
        )
        if problem:
            found["source_urls"] = problem
    return found


def file_size_error(size: int) -> str:
    """Why files of `size` bytes may not be planned, or "" when they may."""
    limit = settings.STORAGEOPS_MAX_FILE_SIZE
    if size > limit:
        return f"Files of up to {limit:,} bytes may be planned (STORAGEOPS_MAX_FILE_SIZE); got {size:,}."
    return ""


def field_errors(campaign) -> dict[str, str]:
    """Field errors of a campaign's own values, one message per field (Campaign.clean)."""
    errors: dict[str, str] = {}
    steps = campaign.concurrency_steps
    if sweep_rules.step_count(steps, campaign.sweep) > 1 and not (campaign.step_seconds or campaign.step_files):
        errors["step_seconds"] = "A sweep of several steps needs a step length in seconds or files."
    errors.update(sweep_rules.sweep_errors(campaign))
    copies = campaign.kind == choices.CampaignKind.TRANSFER
    if (
        copies
        and campaign.checksum_mode in (choices.ChecksumMode.SOURCE, choices.ChecksumMode.TARGET)
        and not (campaign.create_sources or campaign.source_listing)
    ):
        # gfal2 compares one side against an expected value, known only for data StorageOps made.
        errors["checksum_mode"] = (
            "Source-only or target-only checks compare against the data's known checksum: "
            "let StorageOps create the source files, or check both sides."
        )
    if isinstance(steps, list) and campaign.step_files and steps and max(steps) > campaign.step_files:
        errors["step_files"] = (
            f"A step of {campaign.step_files} files cannot run {max(steps)} copies at once: make it at least "
            f"{max(steps)} files (several times that measures the step better), or lower the largest step."
        )
    errors.update(_size_errors(campaign))
    errors.update(_listing_errors(campaign))
    if campaign.kind == choices.CampaignKind.CHECKSUM_LOAD and campaign.file_mix:
        errors["file_mix"] = "A checksum load asks for checksums of files of one size: leave the mix empty."
    errors = {**engine_rules.engine_errors(campaign), **errors}  # the engine's own, where nothing else is wrong
    return errors


def _listing_errors(campaign) -> dict[str, str]:
    """Existing data: read only, sizes from the storage, transfers only."""
    if not campaign.source_listing:
        return {"source_urls": "Choose 'a list of URLs' to use them."} if campaign.source_urls.strip() else {}
    errors: dict[str, str] = {}
    if campaign.create_sources:
        errors["create_sources"] = (
            "Existing data is only read: StorageOps does not write sources it did not create. "
            "Untick this, or choose generated files."
        )
    if campaign.file_mix:
        errors["file_mix"] = "With existing data, the files and their sizes are the storage's: leave the mix empty."
    if campaign.kind != choices.CampaignKind.TRANSFER:
        errors["source_listing"] = "Existing data can be the source of transfers only."
    elif campaign.direction != choices.Direction.FORWARD:
        errors["direction"] = "Existing data is read from the sources only: choose the forward direction."
    if campaign.source_listing == choices.SourceListing.URLS and not campaign.source_urls.strip():
        errors["source_urls"] = "List at least one URL, one a line."
    if campaign.source_listing == choices.SourceListing.FOLDER and campaign.source_urls.strip():
        errors["source_urls"] = "A listed folder takes no URL list: empty it, or choose 'a list of URLs'."
    return errors


def _size_errors(campaign) -> dict[str, str]:
    mix = campaign.file_mix if isinstance(campaign.file_mix, list) else []
    if not all(isinstance(m, dict) and isinstance(m.get("size"), int) and isinstance(m.get("count"), int) for m in mix):
        return {}  # the mix's own validator says what is wrong with it
    sizes = [item["size"] for item in mix]
    field = "file_mix" if sizes else "file_size"
    sizes = sizes or [campaign.file_size or 0]
    if too_large := file_size_error(max(sizes)):
        return {field: too_large}
    if campaign.planned_bytes >= 2**63:
        return {field: "The campaign plans more bytes than can be counted (2^63): fewer or smaller files."}
    return {}

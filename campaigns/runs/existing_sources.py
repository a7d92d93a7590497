"""Existing data as a run's sources: a folder listed through gfal2, or a list of URLs.

BNL and PHENIX moved real datasets, not generated files. Such data belongs to the site: a run
only reads it. Nothing here writes, and clean-up never touches it (cleanup.py deletes sources
only when the run generated them). Sizes and checksums are the storage's own, taken when the
run starts and kept in the run's snapshot (``snapshot["listing"]``), so the plan, a retry and the
comparison all see the same files, and each transfer is checked against its source's checksum.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from django.conf import settings
from django.core.exceptions import ValidationError

from campaigns.choices import ChecksumMode, SourceListing
from campaigns.runs.executors.deadline import DeadlineExceeded
from campaigns.runs.planning import endpoint_folder_url
from campaigns.runs.sources import PreparationFailed
from campaigns.spec import RunSpec
from storageops import paths
from storageops.validators import parse_url_list

log = logging.getLogger(__name__)
T = TypeVar("T")


def needs_listing(snapshot: dict) -> bool:
    """A run of existing data that has not listed its files yet (a retry reuses the listing)."""
    return bool(RunSpec.from_snapshot(snapshot).source_listing) and "listing" not in snapshot


def list_existing(snapshot: dict, storage, control: Callable[[], None] = lambda: None) -> list[dict]:
    """[{"url", "size", "checksum", "endpoint"}] of the run's existing source files.

    Raises PreparationFailed with the storage's words when a folder cannot be listed, a file
    cannot be read, or there is nothing (or too much) to read."""
    spec = RunSpec.from_snapshot(snapshot)
    limit = settings.STORAGEOPS_MAX_LISTED_SOURCES
    sources = snapshot["sources"]
    if spec.source_listing == SourceListing.FOLDER:
        found = _listed_folders(sources, spec.source_path, storage, control, limit)
    else:
        found = _listed_urls(sources, spec.source_urls, storage, control, limit)
    if not found:
        where = f"in {spec.source_path!r} of the source endpoints" if spec.source_listing == "folder" else "listed"
        raise PreparationFailed(f"No file {where}: there is nothing to read.")
    if spec.checksum_mode != ChecksumMode.NONE:
        algorithm = spec.checksum_algorithm
        for entry in found:
            control()
            try:
                entry["checksum"] = _read(lambda url=entry["url"]: storage.checksum_of(url, algorithm))
            except OSError as exc:
                raise PreparationFailed(
                    f"The {spec.checksum_algorithm} of {entry['url']} could not be read: {exc.strerror or exc}"
                ) from None
    return found


def _listed_folders(sources: list[dict], path: str, storage, control, limit: int) -> list[dict]:
    found: list[dict] = []
    for endpoint in sources:
        control()
        folder = endpoint_folder_url(endpoint, path)
        try:
            # Checked again now, on this machine: a folder may have become a link since it was named.
            paths.below_endpoint(folder, endpoint["url"])
        except paths.PathRefused as exc:
            raise PreparationFailed(f"{folder} refused: {' '.join(exc.messages)}") from None
        try:
            files = _read(lambda folder=folder: storage.list_files(folder))
        except OSError as exc:
            raise PreparationFailed(f"{folder} could not be listed: {exc.strerror or exc}") from None
        if len(found) + len(files) > limit:
            raise PreparationFailed(
                f"{folder} holds more than the {limit} files a run may read (STORAGEOPS_MAX_LISTED_SOURCES): "
                "point the source path at a smaller folder, or raise the limit."
            )
        base = folder if folder.endswith("/") else folder + "/"
        for name, size in files:
            url = base + name
            try:
                paths.confine(url, folder, strict=True)  # a name the door gives is read only below its folder
            except paths.PathRefused as exc:
                raise PreparationFailed(f"{url} refused: {' '.join(exc.messages)}") from None
            found.append({"url": url, "size": size, "checksum": "", "endpoint": endpoint["id"]})
    return found


def _listed_urls(sources: list[dict], text: str, storage, control, limit: int) -> list[dict]:
    try:
        urls = parse_url_list(text, limit)
    except ValidationError as exc:
        raise PreparationFailed(" ".join(exc.messages)) from None
    found: list[dict] = []
    for url in urls:
        control()
        endpoint = owner(url, sources)
        if endpoint is None:
            raise PreparationFailed(f"{url} is not below any source endpoint of this campaign{_why(url, sources)}")
        try:
            size = _read(lambda url=url: storage.size_of(url))
        except OSError as exc:
            raise PreparationFailed(f"{url} could not be read: {exc.strerror or exc}") from None
        found.append({"url": url, "size": size, "checksum": "", "endpoint": endpoint["id"]})
    return found


def _read(call: Callable[[], T]) -> T:
    """A read of the site's data, asked once more when it hung past its deadline: gfal2 over
    root:// was seen to leave a listing of a healthy door unanswered for a minute, once in
    thousands. The second try runs on a fresh context (the hung one is dropped at its deadline);
    a door that hangs twice fails the run with the storage's words. Only reads are asked again."""
    try:
        return call()
    except DeadlineExceeded as exc:
        log.warning("%s; asking once more", exc.strerror)
        return call()


def owner(url: str, endpoints: list[dict]) -> dict | None:
    """The endpoint whose URL prefix the URL is below by the one path rule (the longest, if
    several are), checked when the run reads it: file:// resolves its links now."""
    found = paths.owner(url, [ep["url"] for ep in endpoints])
    return next((ep for ep in endpoints if ep["url"] == found), None)


def _why(url: str, endpoints: list[dict]) -> str:
    """What the path rule said against each source endpoint, as the end of a sentence."""
    reasons = []
    for endpoint in endpoints:
        try:
            paths.below_endpoint(url, endpoint["url"])
        except paths.PathRefused as exc:
            reasons.append(" ".join(exc.messages))
    return f": {'; '.join(reasons)}" if reasons else "."


def listed_totals(listing: list[dict]) -> tuple[int, int]:
    return len(listing), sum(entry["size"] for entry in listing)

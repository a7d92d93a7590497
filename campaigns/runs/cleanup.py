"""Clean-up after a run: delete the files it wrote, and only those.

Every file a run writes lies in its own folder, <endpoint prefix>/<destination path>/run-<id>/.
Before anything is deleted, each URL is checked to lie inside that folder on the endpoint it
was planned for, after percent-decoding and normalising its path; a URL with a '..' segment,
in any encoding, is refused outright. A path check alone cannot see a run folder that was
replaced by a symlink to someone else's data, so a file is deleted only when the door proves it
is what the run wrote: its size is the planned size and its checksum is the one the run
recorded (or, with none recorded, the source's checksum now). A file with other content is kept
and reported "kept: differs"; one the door cannot prove either way is kept as "unproven".
Folders are removed last and only when empty (rmdir never deletes content).
A run's generated sources (create_sources) lie in its seed's folder below the source path
(planning.sources_folder); remove_sources deletes those the run's plan wrote, while the run is
not yet final: no retry of it can exist yet, and a retry writes the sources it needs again.
Deletes go through the run's own engine (gfal2, with the endpoints' credentials), which
reports a failure as an OSError carrying the errno. A file
that is already gone counts as absent, not as a failure; every failure is kept with its
message in the run's results and in the event that reports the clean-up.
"""

from __future__ import annotations

import errno
import json
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

from campaigns.choices import TransferState
from campaigns.models import Run, Transfer
from campaigns.results.finalize import add
from campaigns.runs import store
from campaigns.runs.planning import endpoint_folder_url, plan, run_folder, sources_folder
from campaigns.spec import RunSpec
from collectors.events import log_event
from storageops import paths

log = logging.getLogger(__name__)
DELETE_CONCURRENCY = 8
MAX_KEPT_ERRORS = 20


def inside_prefix(url: str, prefix: str) -> bool:
    """True if `url` names something strictly below the folder `prefix`, by the one path rule
    (storageops.paths: same origin, no '..' in any encoding, file:// links resolved now)."""
    try:
        paths.confine(url, prefix, strict=True)
    except paths.PathRefused:
        return False
    return True


def own_folder(endpoint: dict, folder: str) -> str | None:
    """URL of `folder` below the endpoint when the rule finds it strictly below it (checked at
    use: the endpoint's row may predate the rule, or its folder now be a link), else None."""
    url = endpoint_folder_url(endpoint, folder)
    try:
        paths.below_endpoint(url, endpoint["url"], strict=True)
    except paths.PathRefused as exc:
        log.warning("clean-up: refused %s: %s", url, " ".join(exc.messages))
        return None
    return url


def run_folders(run: Run) -> dict[int, str]:
    """Endpoint id → URL of the run's folder on that endpoint."""
    snapshot = run.snapshot
    folder = run_folder(RunSpec.of(run), run.pk)
    endpoints = [*snapshot["sources"], *snapshot["destinations"]]
    return {ep["id"]: url for ep in endpoints if (url := own_folder(ep, folder)) is not None}


def remove_sources(run: Run, engine, tick: Callable[[], object] = lambda: None) -> dict:
    """Delete the source files `run`'s plan generated (and their folders, once empty); returns
    the report. Call it before the run is final (see the module's docstring), with `tick`
    renewing its driver's lease: it is called from this thread between deletes."""
    spec = RunSpec.of(run)
    report = _new_report()
    if not spec.create_sources:
        # Files that were there before the run (existing data included, which can never be
        # generated: Campaign.clean): the site's, never ours to delete.
        return report
    seed = spec.retry.seed if spec.retry is not None else run.pk
    endpoints = {ep["id"]: ep for ep in [*run.snapshot["sources"], *run.snapshot["destinations"]]}
    folder = sources_folder(spec, seed)
    # What the plan recorded of its generated data, a checksum a size (none if never planned).
    checksums = store.source_checksums(run.pk) or {}
    targets: dict[str, Target] = {}
    homes_of: dict[str, int] = {}
    for t in plan(run.snapshot, run.pk):
        if t.source in targets or t.source.startswith("mock:"):
            continue
        home = own_folder(endpoints[t.source_endpoint_id], folder)
        if home is not None and inside_prefix(t.source, home):
            targets[t.source] = Target(t.source, t.size, checksums.get(t.size, ""))
            homes_of[t.source] = t.source_endpoint_id
        else:
            report["refused"] += 1
            _keep_error(report, f"refused (outside {home}): {t.source}")
    _delete_all(engine, list(targets.values()), report, spec.checksum_algorithm, tick)
    homes = {own_folder(endpoints[i], folder) for i in set(homes_of.values())} - {None}
    sizes = {url.split("?", 1)[0].rsplit("/", 1)[0] + "/" for url in targets}
    report["folders_removed"] = _remove_folders(engine, sizes) + _remove_folders(engine, homes)
    return report


def cleanup_run(run: Run, engine, *, sources: dict | None = None) -> dict:
    """Delete the run's files through `engine` (needs size_of, checksum_of, remove and
    remove_folder) once each is proven the run's own; returns the report,
    with `sources` (remove_sources' report) in it when given."""
    folders = run_folders(run)
    # Skipped transfers never started; cancelled ones may have left a partial file.
    written = (
        Transfer.objects.filter(run=run)
        .filter(state__in=[TransferState.SUCCEEDED, TransferState.FAILED, TransferState.CANCELLED])
        .values_list("destination", "destination_endpoint_id", "size", "destination_checksum", "source_checksum",
                     "source")
    )  # fmt: skip
    report = _new_report()
    targets: list[Target] = []
    used: set[int] = set()
    for url, endpoint_id, size, dst_sum, src_sum, source in written.iterator(chunk_size=5000):
        if endpoint_id in folders and inside_prefix(url, folders[endpoint_id]):
            targets.append(Target(url, size, dst_sum or src_sum, source))
            used.add(endpoint_id)
        else:
            report["refused"] += 1
            _keep_error(report, f"refused (outside {folders.get(endpoint_id, 'the run folder')}): {url}")

    _delete_all(engine, targets, report, RunSpec.of(run).checksum_algorithm)
    report["folders_removed"] = _remove_folders(engine, [folders[i] for i in used])
    if sources is not None:
        report["sources"] = sources
    _record(run, report)
    return report


def record_sources(run: Run, sources: dict) -> None:
    """The clean-up report of a run that never started: its sources only."""
    _record(run, {**_new_report(), "folders_removed": 0, "sources": sources})


def _new_report() -> dict:
    return {"deleted": 0, "absent": 0, "failed": 0, "refused": 0, "kept_differs": 0, "kept_unproven": 0, "errors": []}


class Target(NamedTuple):
    """A file clean-up may delete once the door proves it is what the run wrote."""

    url: str
    size: int
    checksum: str  # what the run recorded of its content ("" if nothing)
    source: str = ""  # with no checksum recorded: the file it is a copy of


def _same(a: str, b: str) -> bool:
    # gfal2 and FTS print adler32 with or without its leading zeros.
    return a.strip().lower().lstrip("0") == b.strip().lower().lstrip("0")


def _proof(engine, target: Target, algorithm: str) -> tuple[str, str]:
    """("ok", "") when the file on the door is the one the run wrote; else why it is kept."""
    if target.url.startswith("mock:"):
        return "ok", ""  # gfal2's simulator: nothing is stored, nothing can be lost
    size = engine.size_of(target.url)
    if size != target.size:
        return "kept_differs", f"kept: differs ({size} bytes on the door, the run wrote {target.size}): {target.url}"
    expected = target.checksum
    if not expected and target.source:
        try:
            expected = engine.checksum_of(target.source, algorithm)
        except OSError as exc:
            return "kept_unproven", f"kept: unproven (no checksum recorded, source unreadable: {exc}): {target.url}"
    if not expected:
        return "kept_unproven", f"kept: unproven (no checksum to compare with): {target.url}"
    found = engine.checksum_of(target.url, algorithm)
    if not _same(found, expected):
        return "kept_differs", f"kept: differs ({algorithm} {found} on the door, the run's {expected}): {target.url}"
    return "ok", ""


def _delete_all(
    engine, targets: list[Target], report: dict, algorithm: str, tick: Callable[[], object] = lambda: None
) -> None:
    def delete(target: Target) -> tuple[str, str]:
        try:
            verdict, why = _proof(engine, target, algorithm)
            if verdict != "ok":
                return verdict, why
            engine.remove(target.url)
            return "deleted", ""
        except OSError as exc:  # recorded, never fatal
            if exc.errno == errno.ENOENT:
                return "absent", ""
            return "failed", f"{target.url}: {exc.strerror or exc}"

    with ThreadPoolExecutor(max_workers=DELETE_CONCURRENCY) as pool:
        for outcome, message in pool.map(delete, targets):
            report[outcome] += 1
            if message:
                _keep_error(report, message)
            tick()


def _remove_folders(engine, urls) -> int:
    removed = 0
    for url in sorted(set(urls)):
        try:
            engine.remove_folder(url)
            removed += 1
        except OSError as exc:  # not empty (a failed delete), or a plugin without rmdir (mock://)
            log.info("clean-up: folder %s kept: %s", url, exc.strerror or exc)
    return removed


def _keep_error(report: dict, message: str) -> None:
    if len(report["errors"]) < MAX_KEPT_ERRORS:
        report["errors"].append(message[:500])


def _record(run: Run, report: dict) -> None:
    add(run, "cleanup", report)
    problems = report["failed"] + report["refused"]
    kept = report.get("kept_differs", 0) + report.get("kept_unproven", 0)
    log_event(
        "note",
        f"Clean-up of run {run}: {report['deleted']} files deleted"
        + (f", {report['failed']} failed, {report['refused']} refused" if problems else "")
        + (
            f", {kept} kept ({report.get('kept_differs', 0)} differ from what the run wrote, "
            f"{report.get('kept_unproven', 0)} unproven)"
            if kept
            else ""
        )
        + (f", {report['absent']} already gone" if report["absent"] else "")
        + (f"; {report['sources']['deleted']} source files deleted" if "sources" in report else ""),
        run=run,
        detail=json.dumps(report),
    )

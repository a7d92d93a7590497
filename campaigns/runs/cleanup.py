"""Clean-up after a run: delete the files it wrote, and only those.

Every file a run writes lies in its own folder, <endpoint prefix>/<destination path>/run-<id>/.
Before anything is deleted, each URL is checked to lie inside that folder on the endpoint it
was planned for, after normalising its path; a URL with a '..' segment is refused outright.
Deletes go through the run's own engine (gfal2, with the endpoints' credentials), which
reports a failure as an OSError carrying the errno. A file
that is already gone counts as absent, not as a failure; every failure is kept with its
message in the run's results and in the event that reports the clean-up.
"""

from __future__ import annotations

import errno
import json
import logging
import posixpath
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

from campaigns.choices import TransferState
from campaigns.models import Run, Transfer
from campaigns.results.finalize import add
from campaigns.runs.planning import endpoint_folder_url, run_folder
from campaigns.spec import RunSpec
from collectors.events import log_event

log = logging.getLogger(__name__)
DELETE_CONCURRENCY = 8
MAX_KEPT_ERRORS = 20


def inside_prefix(url: str, prefix: str) -> bool:
    """True if `url` names something strictly below the folder `prefix` (same scheme and host)."""
    u, p = urlsplit(url), urlsplit(prefix)
    if (u.scheme, u.netloc) != (p.scheme, p.netloc) or "\x00" in url:
        return False
    if any(part == ".." for part in u.path.split("/")):
        return False
    base = posixpath.normpath(p.path).rstrip("/") + "/"
    return posixpath.normpath(u.path).startswith(base)


def run_folders(run: Run) -> dict[int, str]:
    """Endpoint id → URL of the run's folder on that endpoint."""
    snapshot = run.snapshot
    folder = run_folder(RunSpec.of(run), run.pk)
    return {ep["id"]: endpoint_folder_url(ep, folder) for ep in [*snapshot["sources"], *snapshot["destinations"]]}


def cleanup_run(run: Run, engine) -> dict:
    """Delete the run's files through `engine` (needs remove/remove_folder); returns the report."""
    folders = run_folders(run)
    # Skipped transfers never started; cancelled ones may have left a partial file.
    written = (
        Transfer.objects.filter(run=run)
        .filter(state__in=[TransferState.SUCCEEDED, TransferState.FAILED, TransferState.CANCELLED])
        .values_list("destination", "destination_endpoint_id")
    )
    report = {"deleted": 0, "absent": 0, "failed": 0, "refused": 0, "errors": []}
    targets = []
    used: set[int] = set()
    for url, endpoint_id in written.iterator(chunk_size=5000):
        if endpoint_id in folders and inside_prefix(url, folders[endpoint_id]):
            targets.append(url)
            used.add(endpoint_id)
        else:
            report["refused"] += 1
            _keep_error(report, f"refused (outside {folders.get(endpoint_id, 'the run folder')}): {url}")

    def delete(url: str) -> tuple[str, str]:
        try:
            engine.remove(url)
            return "deleted", ""
        except OSError as exc:  # recorded, never fatal
            if exc.errno == errno.ENOENT:
                return "absent", ""
            return "failed", f"{url}: {exc.strerror or exc}"

    with ThreadPoolExecutor(max_workers=DELETE_CONCURRENCY) as pool:
        for outcome, message in pool.map(delete, targets):
            report[outcome] += 1
            if message:
                _keep_error(report, message)
    report["folders_removed"] = _remove_folders(engine, [folders[i] for i in used])
    _record(run, report)
    return report


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
    log_event(
        "note",
        f"Clean-up of run {run}: {report['deleted']} files deleted"
        + (f", {report['failed']} failed, {report['refused']} refused" if problems else "")
        + (f", {report['absent']} already gone" if report["absent"] else ""),
        run=run,
        detail=json.dumps(report),
    )

"""Where a readiness check writes, and taking it all away again.

Every path a check builds comes from `probe_url` (one place, so the one path rule of the
storage paths has one call to wrap). The files a check may have left are read back from its
record alone (each writing step keeps its destination), so the check's worker, a cancel and the
recovery of a check whose worker died all remove them the same way.
"""

from __future__ import annotations

import errno
from collections.abc import Callable

from django.utils import timezone

from campaigns.models import Endpoint, ReadinessCheck
from campaigns.readiness.tokens import CheckTokens, check_credentials
from campaigns.runs.engines.copies import CopyOptions
from campaigns.runs.executors.deadline import GIVE_UP, Stopped, call_with_deadline
from campaigns.runs.planning import endpoint_folder_url
from campaigns.runs.storage import Storage, open_storage
from storageops import paths

FOLDER = "storageops-readiness"
WRITING_OPERATIONS = ("upload", "tpc", "refused")
# How long a removal may wait on an endpoint that already failed to answer in this check.
SILENT_DOOR_SECONDS = 5
# How the summary of a check the recovery ended ends until the removal after it has said what
# became of its files (remove_after_lost_worker), and how it ends once they are all gone.
BEING_REMOVED = "; its files are being removed"
REMOVED = "; its files removed"


def check_folder(check_id: int) -> str:
    """The check's own folder below an endpoint's base path."""
    return f"{FOLDER}/check-{check_id}"


def probe_url(endpoint: Endpoint, check_id: int, name: str) -> str:
    """The URL of the file `name` a check writes on `endpoint`."""
    return endpoint_folder_url({"url": endpoint.url, "protocol": endpoint.protocol}, check_folder(check_id)) + name


def left_behind(steps: list[dict]) -> list[tuple[str, str]]:
    """(endpoint name, URL) of every file a step wrote, or may have begun to write (it was
    stopped mid-way: a deadline, a cancel, a lost worker), that its delete did not prove gone.
    A write the storage refused left nothing."""
    deleted = {s["destination"] for s in steps if s["operation"] == "delete" and s["state"] == "passed"}
    # A write that must be refused wrote where it failed (the door took it) and not where it passed.
    wrote = {"refused": ("failed", "running", "cancelled")}
    return [(s["endpoint"], s["destination"]) for s in steps
            if s["operation"] in WRITING_OPERATIONS and s["destination"] not in deleted
            and (s["state"] in wrote.get(s["operation"], ("passed", "running", "cancelled"))
                 or s.get("stopped"))]  # fmt: skip


def remove_probes(
    check: ReadinessCheck,
    copier_factory: Callable[..., Storage] = open_storage,
    keepalive: Callable[[], object] | None = None,
) -> dict[str, str]:
    """Delete what the check left on its endpoints, then its folders; each delete under the
    endpoint's timeout, or SILENT_DOOR_SECONDS on an endpoint a step of this check was cut short
    on (it did not answer: waiting its whole timeout again would hold a cancel for minutes).
    `keepalive` is called every second meanwhile (the check's lease). Returns what became of
    each file it tried, by URL: "" when it is gone, else why not in words."""
    endpoints = {ep.name: ep for ep in (check.endpoint, check.peer) if ep is not None}
    listed = list(endpoints.values())
    folders = {ep.name: probe_url(ep, check.pk, "") for ep in listed}
    credentials = list(check_credentials(listed, folders, CheckTokens(listed)).values())
    cut_short = {s["endpoint"] for s in check.steps if s.get("stopped")}

    def remove(name: str, operation: str, url: str) -> str:
        if name in cut_short:  # one short try, and a cancel it ignores is not waited for
            patience, give_up = min(endpoints[name].timeout, SILENT_DOOR_SECONDS), 1.0
        else:
            patience, give_up = endpoints[name].timeout, GIVE_UP
        return _remove(copier_factory, credentials, (patience, give_up), operation, url, keepalive)

    removal: dict[str, str] = {}
    silent: set[str] = set()
    touched = {name for name, _ in left_behind(check.steps)} | {
        s["endpoint"] for s in check.steps if s["operation"] == "delete" and s["state"] == "passed"
    }
    for name, url in left_behind(check.steps):
        if name not in endpoints:
            continue
        refused = _refusal(endpoints[name], check.pk, url)
        if refused:
            removal[url] = f"not removed, {refused}"
            silent.add(name)  # its folder is not touched either
            continue
        if name in silent:
            removal[url] = f"not tried, {name} did not answer"
            continue
        removal[url] = problem = remove(name, "remove", url)
        silent |= {name} if problem.startswith("no answer") else set()
    for name in sorted(touched - silent):
        # Best effort: a folder that stays (another file, a plugin without rmdir) is named by the
        # check's id; a door that did not answer is not waited for twice.
        folder = probe_url(endpoints[name], check.pk, "").rstrip("/")
        if not _refusal(endpoints[name], check.pk, folder, folder=True):
            remove(name, "remove_folder", folder)
    return removal


def not_removed(removal: dict[str, str]) -> list[str]:
    """The files a removal left, each with why, in words."""
    return [f"{url}: {why}" for url, why in removal.items() if why]


def left_words(removal: dict[str, str]) -> str:
    """What a summary ends with for the files a removal left ("" when it left none)."""
    left = not_removed(removal)
    return f"; not removed: {'; '.join(left)}" if left else ""


def close_unrun(steps: list[dict], why: str) -> list[dict]:
    """The steps of a check that ended before it reached them: not run, and why, rather than
    pending for good. A delete step among them whose file is to be removed after the check is
    marked so (removal_pending) until its removal is recorded."""
    left = {url for _, url in left_behind(steps)}
    closed = []
    for step in steps:
        if step["state"] == "pending":
            step = {**step, "state": "skipped", "message": f"Not run: {why}."}
            if step["operation"] == "delete" and step["destination"] in left:
                step["extra"] = {**step.get("extra", {}), "cleanup": "pending"}
        closed.append(step)
    return closed


def removal_pending(steps: list[dict]) -> bool:
    """Whether files of the check still wait for the removal after it (its page keeps following it)."""
    return any(step.get("extra", {}).get("cleanup") == "pending" for step in steps)


def with_removal(steps: list[dict], removal: dict[str, str]) -> list[dict]:
    """The steps with what the removal did of each file their delete step did not prove gone:
    each such delete step says whether the clean-up removed its file, or why not."""
    recorded = []
    for step in steps:
        awaited = step.get("extra", {}).get("cleanup") == "pending"
        if step["operation"] == "delete" and (step["destination"] in removal or awaited):
            why = removal.get(step["destination"], "not tried")
            said = f"The clean-up did not remove its file: {why}." if why else "The clean-up removed its file."
            extra = {**step.get("extra", {}), "cleanup": why or "removed"}
            step = {**step, "message": " ".join(filter(None, [step["message"], said])), "extra": extra}
        recorded.append(step)
    return recorded


def remove_after_lost_worker(check: ReadinessCheck, copier_factory: Callable[..., Storage] = open_storage) -> list[str]:
    """Remove the files of a check the recovery ended (its worker lost), then record what became
    of them: its delete steps and its summary say it, in place of "being removed". Returns what
    could not be removed, in words."""
    removal = remove_probes(check, copier_factory)
    summary = check.summary.removesuffix(BEING_REMOVED)
    if summary != check.summary:
        summary += left_words(removal) or REMOVED
    ReadinessCheck.objects.filter(pk=check.pk).update(
        steps=with_removal(check.steps, removal), summary=summary[:300], last_updated=timezone.now()
    )
    return not_removed(removal)


def _refusal(endpoint: Endpoint, check_id: int, url: str, *, folder: bool = False) -> str:
    """The one path rule once more, now that a delete is about to be sent: the URL lies below the
    check's own folder (or is that folder) on an endpoint that itself passes the rule (file://:
    links resolved on this worker). "" when it does, else why not."""
    home = probe_url(endpoint, check_id, "")
    try:
        paths.below_endpoint(home, endpoint.url, strict=True)
        paths.confine(url, home, strict=not folder)
    except paths.PathRefused as exc:
        return "refused: " + " ".join(exc.messages)
    return ""


def _remove(factory, credentials, limits: tuple[int, float], operation: str, url: str, keepalive) -> str:
    timeout, give_up = limits
    copier = factory(CopyOptions(timeout=timeout), credentials)

    def tick() -> bool:
        if keepalive is not None:
            keepalive()
        return False  # a removal is never cancelled: it is what a cancel ends with

    try:
        call_with_deadline(copier, lambda: getattr(copier, operation)(url), timeout, tick=tick, give_up=give_up)
    except Stopped:
        return f"no answer within {timeout} s"
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return ""
        return exc.strerror or str(exc)
    return ""

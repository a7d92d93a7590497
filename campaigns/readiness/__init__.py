"""The functional readiness check sites run before any stress test (the WLCG DOMA TPC smoke test,
inside the product): upload, stat, checksum, download on each endpoint; with a peer, third-party
copies in both directions in every mode the two schemes share; then every file it wrote deleted
and proved gone. Each step passes or fails with the storage's own message. A step that needs a
file an earlier step failed to write is not run, and says which step it waited for: with a
read-only destination exactly the steps that write there fail.

Each step runs under a deadline, its endpoint's timeout (the smallest of the endpoints it
touches): at the deadline its gfal2 call is cancelled, and given up if it does not return. While
it works the worker renews its lease and looks for a cancel every second (`lease`). What
the check wrote is removed at every ending (`probes`).
"""

from __future__ import annotations

import dataclasses
import errno
import logging
import os
import subprocess
import tempfile
import time
import traceback
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path

from celery import current_app
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from campaigns.choices import ErrorCategory
from campaigns.models import Endpoint, ReadinessCheck, ReadinessGrid
from campaigns.readiness import lease
from campaigns.readiness.probes import REMOVED, close_unrun, left_words, probe_url, remove_probes, with_removal
from campaigns.readiness.tokens import CheckTokens, check_credentials, elsewhere_scope, read_only_scope
from campaigns.runs.engines.copies import CopyJob, CopyOptions, EndpointCredentials
from campaigns.runs.engines.errors import categorize
from campaigns.runs.executors.deadline import Stopped, call_with_deadline
from campaigns.runs.leases import lease_holder_id
from campaigns.runs.storage import Storage, StorageFactory, open_storage
from campaigns.runs.storage import library as storage_library
from campaigns.runs.tokens import TokenError
from storageops import paths

log = logging.getLogger(__name__)

PROBE_BYTES = 1024 * 1024
_HTTP = frozenset({"davs", "https", "http", "dav"})
_ROOT = frozenset({"root", "roots", "xroot", "xroots"})


@dataclass
class Step:
    key: str
    title: str
    operation: str  # upload, stat, checksum, download, tpc, delete, refused (a write the door must refuse)
    endpoint: str  # the endpoint the step writes to, or reads from
    writes: bool
    source: str = ""
    destination: str = ""
    mode: str = ""  # tpc: pull, push or tpc (XRootD's: the destination always pulls)
    needs: tuple[str, ...] = ()
    state: str = "pending"  # running, passed, failed, skipped, cancelled
    message: str = ""
    seconds: float | None = None
    started: float | None = None  # epoch: the page shows a running step's elapsed time
    deadline: int = 0  # seconds: the timeout of the endpoints it touches
    stopped: bool = False  # cut short (deadline, cancel, lost worker): it may have left a partial file
    credentials: str = ""
    auth: tuple = ()  # (endpoint name, credential kind: token, x509 or "") the step presents
    extra: dict = field(default_factory=dict)
    # The scope of the token its endpoint presents, when not the check's own (read, create and
    # modify on its folder): only for an endpoint on a token issuer.
    token_scope: str = ""


def tpc_modes(source_scheme: str, destination_scheme: str) -> list[str]:
    """The third-party copy modes two endpoints' schemes share: HTTP has pull and push; XRootD
    one mode, the destination pulling; GridFTP one too; between two protocols there is none."""
    if source_scheme in _HTTP and destination_scheme in _HTTP:
        return ["pull", "push"]
    if source_scheme in _ROOT and destination_scheme in _ROOT:
        return ["tpc"]
    if source_scheme == destination_scheme == "gsiftp":
        return ["tpc"]  # GridFTP's one: the client steers both doors, the data flows between them
    return []


_AUTH = (("token", "bearer token", "bearer_token"), ("x509", "X.509", "x509_proxy"))


def auth_variants(endpoint: Endpoint) -> list[tuple[str, str]]:
    """(kind, label) of each credential the endpoint has: with a token and a proxy both, each is
    checked on its own (the DOMA smoke test runs every step with either); with none, anonymous."""
    found = [(kind, label) for kind, label, attr in _AUTH if getattr(endpoint, attr)]
    if endpoint.token_issuer_id:
        found.insert(0, ("token", f"tokens of {endpoint.token_issuer.name}"))
    return found or [("", "anonymous")]


def token_steps(endpoint: Endpoint, folder: str, upload: str, probe: str, t: str) -> list[Step]:
    """An endpoint on a token issuer: a read with a read-only token must pass; a write with it,
    and one with a token for another path, must be refused by the door."""
    auth = ((endpoint.name, "token"),)
    read_only, elsewhere = read_only_scope(endpoint, folder), elsewhere_scope(endpoint, folder)
    return [
        Step(f"token-read:{endpoint.name}{t}", f"Read on {endpoint.name} with a read-only token", "download",
             endpoint.name, False, source=probe, needs=(upload,), credentials=read_only, auth=auth,
             token_scope=read_only),
        Step(f"token-read-only-write:{endpoint.name}{t}", f"Write on {endpoint.name} with a read-only token "
             "(must be refused)", "refused", endpoint.name, True, destination=folder + "refused-read-only",
             needs=(upload,), credentials=read_only, auth=auth, token_scope=read_only),
        Step(f"token-elsewhere-write:{endpoint.name}{t}", f"Write on {endpoint.name} with a token for another "
             "path (must be refused)", "refused", endpoint.name, True, destination=folder + "refused-elsewhere",
             needs=(upload,), credentials=elsewhere, auth=auth, token_scope=elsewhere),
    ]  # fmt: skip


def plan(check: ReadinessCheck) -> list[Step]:
    """Every step of a check, in the order it runs."""
    endpoints = [check.endpoint, *([check.peer] if check.peer_id else [])]

    def url(endpoint: Endpoint, name: str) -> str:
        return probe_url(endpoint, check.pk, name)

    variants = {ep.name: auth_variants(ep) for ep in endpoints}

    def tag(endpoint: Endpoint, kind: str) -> str:
        # Keys and file names name the credential only where an endpoint has more than one.
        return f"[{kind}]" if len(variants[endpoint.name]) > 1 else ""

    steps: list[Step] = []
    written: list[tuple[str, Endpoint, str, str, str]] = []  # (step key, endpoint, file, credential kind, label)
    for ep in endpoints:
        for kind, label in variants[ep.name]:
            t = tag(ep, kind)
            with_ = f" with {label}" if t else ""
            probe, upload, auth = url(ep, f"probe{t and '-' + kind}"), f"upload:{ep.name}{t}", ((ep.name, kind),)
            first: tuple[str, ...] = ()
            if kind == "x509":
                # gfal2 goes on without a proxy file it cannot read: checked first, by name.
                steps.append(Step(f"proxy:{ep.name}", f"X.509 proxy of {ep.name}", "proxy", ep.name, False,
                                  credentials=label, auth=auth))  # fmt: skip
                first = (f"proxy:{ep.name}",)
            steps += [
                Step(upload, f"Upload to {ep.name}{with_}", "upload", ep.name, True, destination=probe,
                     needs=first, credentials=label, auth=auth),
                Step(f"stat:{ep.name}{t}", f"Stat on {ep.name}{with_}", "stat", ep.name, False, source=probe,
                     needs=(upload,), credentials=label, auth=auth),
                Step(f"checksum:{ep.name}{t}", f"Adler32 of {ep.name}{with_}", "checksum", ep.name, False,
                     source=probe, needs=(upload,), credentials=label, auth=auth),
                Step(f"download:{ep.name}{t}", f"Download from {ep.name}{with_}", "download", ep.name, False,
                     source=probe, needs=(upload,), credentials=label, auth=auth),
            ]  # fmt: skip
            written.append((upload, ep, probe, kind, label))
            if kind == "token" and ep.token_issuer_id:
                steps += token_steps(ep, url(ep, ""), upload, probe, t)
    if check.peer_id:
        for src, dst in ((check.endpoint, check.peer), (check.peer, check.endpoint)):
            # The destination presents the same kind of credential where it has one.
            theirs = dict(variants[dst.name])
            for mode in tpc_modes(src.protocol, dst.protocol):
                for kind, label in variants[src.name]:
                    dst_kind = kind if kind in theirs else next(iter(theirs))
                    t = tag(src, kind)
                    key = f"tpc-{mode}:{src.name}>{dst.name}{t}"
                    target = url(dst, f"from-{src.name}-{mode}{t and '-' + kind}")
                    name = f"TPC {mode} {src.name} → {dst.name}" if mode != "tpc" else f"TPC {src.name} → {dst.name}"
                    steps.append(
                        Step(key, name + (f" with {label}" if t else ""), "tpc", dst.name, True,
                             source=url(src, f"probe{t and '-' + kind}"), destination=target, mode=mode,
                             needs=(f"upload:{src.name}{t}", *((f"proxy:{dst.name}",) if dst_kind == "x509" else ())),
                             credentials=f"{label} → {theirs[dst_kind]}",
                             auth=((src.name, kind), (dst.name, dst_kind)))
                    )  # fmt: skip
                    written.append((key, dst, target, dst_kind, theirs[dst_kind]))
    for key, ep, target, kind, label in written:
        steps.append(
            Step(f"delete:{target}", f"Delete {target.rsplit('/', 1)[1]} on {ep.name}", "delete", ep.name, True,
                 destination=target, needs=(key,), credentials=label, auth=((ep.name, kind),))
        )  # fmt: skip
    timeouts = {ep.name: ep.timeout for ep in endpoints}
    for step in steps:
        step.deadline = min(timeouts[name] for name, _ in step.auth)
    return steps


def start(
    endpoint: Endpoint, peer: Endpoint | None = None, *, user=None, grid: ReadinessGrid | None = None
) -> ReadinessCheck:
    """Record a check and hand it to a transfers worker once the transaction commits."""
    with transaction.atomic():
        check = ReadinessCheck(
            endpoint=endpoint, peer=peer, grid=grid, requested_by=user if user and user.is_authenticated else None
        )
        check.save()
        transaction.on_commit(lambda: current_app.send_task("campaigns.readiness_check", (check.pk,)))
    return check


def unchecked(endpoints: list[Endpoint]) -> list[Endpoint]:
    """The endpoints among these that never passed a readiness check (on their own or in a pair)."""
    ids = [ep.pk for ep in endpoints]
    pairs = ReadinessCheck.objects.filter(state=ReadinessCheck.State.PASSED).filter(
        Q(endpoint__in=ids) | Q(peer__in=ids)
    )
    passed = {pk for pair in pairs.values_list("endpoint_id", "peer_id") for pk in pair}
    return [ep for ep in endpoints if ep.pk not in passed and ep.protocol != "mock"]


def run_check(check: ReadinessCheck, copier_factory: StorageFactory = open_storage) -> ReadinessCheck:
    """Run every step of the queued `check` now under this worker's lease, saving its record
    after each step (the page follows it); whatever happens, its files are removed at the end.
    A check another worker took, or one cancelled before it began, is returned as it is."""
    executor = lease_holder_id()
    if not lease.take(check.pk, executor):
        check.refresh_from_db()
        return check
    watch = lease.Watch(check.pk, executor)
    steps = plan(check)
    crash = ""
    try:
        _run_steps(check, steps, watch, copier_factory, executor)
    except Exception:  # any fault ends the check failed, never running for good
        log.exception("readiness check %s crashed", check.pk)
        crash = traceback.format_exc(limit=-1).strip().splitlines()[-1]
        for step in steps:
            if step.state == "running":  # what it was doing ends with the fault's words
                step.state, step.stopped, step.message = "failed", True, f"Ended by a fault: {crash}"
    if watch.lost:
        # The recovery ended it (this worker was silent too long) and removes its files.
        check.refresh_from_db()
        return check
    check.steps = [asdict(s) for s in steps]
    if crash:
        check.steps = close_unrun(check.steps, "the check ended on a fault")
    removal = remove_probes(check, copier_factory, keepalive=lambda: lease.save(check.pk, executor))
    check.steps = with_removal(check.steps, removal)
    state, summary = _outcome(steps, cancelled=watch.cancelled, crash=crash, removal=removal)
    lease.save(check.pk, executor, state=state, summary=summary, steps=check.steps, finished_at=timezone.now())
    lease.finished(check.pk)
    check.refresh_from_db()
    return check


def _run_steps(
    check: ReadinessCheck, steps: list[Step], watch: lease.Watch, copier_factory: StorageFactory, executor: str
) -> None:
    endpoints = [check.endpoint, *([check.peer] if check.peer_id else [])]
    tokens = CheckTokens(endpoints)
    credentials = check_credentials(endpoints, {ep.name: probe_url(ep, check.pk, "") for ep in endpoints}, tokens)

    def save() -> None:
        lease.save(check.pk, executor, steps=[asdict(s) for s in steps])

    save()
    data = os.urandom(PROBE_BYTES)
    with tempfile.TemporaryDirectory(prefix="storageops-readiness-") as scratch:
        local = Path(scratch) / "probe"
        local.write_bytes(data)
        runner = _Runner(copier_factory, credentials, data, local, Path(scratch), watch)
        runner.tokens = tokens
        runner.homes = [(ep.url, probe_url(ep, check.pk, "")) for ep in endpoints]
        for i, step in enumerate(steps):
            if watch.cancelled or watch.lost or watch():
                if watch.lost:
                    return
                step.state, step.message = "skipped", "Not run: the check was cancelled."
            elif waiting := [s for s in steps[:i] if s.key in step.needs and s.state != "passed"]:
                step.state, step.message = "skipped", f"Not run: {waiting[0].title} did not pass."
            else:
                step.state, step.started = "running", time.time()
                save()
                runner.run(step)
            save()


def _summary(steps: list[Step], failed: list[Step]) -> str:
    passed = len(steps) - len(failed)
    if not failed:
        return f"All {len(steps)} steps passed."
    first = next((s for s in failed if s.state == "failed"), failed[0])
    return f"{passed} of {len(steps)} steps passed; first failure: {first.title}: {first.message}"


def _outcome(steps: list[Step], *, cancelled: bool, crash: str, removal: dict[str, str]) -> tuple[str, str]:
    """The check's final state and summary line; `removal` what became of the files it left."""
    State = ReadinessCheck.State
    kept = left_words(removal)
    if crash:
        return State.FAILED, f"failed: {crash}{kept}"[:300]
    if cancelled:
        done = sum(1 for s in steps if s.state == "passed")
        return State.CANCELLED, f"Cancelled after {done} of {len(steps)} steps passed{kept or REMOVED}"[:300]
    failed = [s for s in steps if s.state != "passed"]
    return (State.FAILED if failed else State.PASSED), (_summary(steps, failed) + kept)[:300]


class _Runner:
    """Runs one step with a copier of the options the step needs."""

    homes: list[tuple[str, str]] = []  # (endpoint URL, the check's folder on it): what steps may touch
    tokens: CheckTokens | None = None

    def __init__(
        self, factory: StorageFactory, credentials: dict, data: bytes, local: Path, scratch: Path, watch: lease.Watch
    ) -> None:
        self.factory, self.credentials, self.watch = factory, credentials, watch
        self.data, self.local, self.scratch = data, local, scratch
        self.adler32 = f"{zlib.adler32(data):08x}"

    def copier(self, step: Step) -> Storage:
        """A copier presenting the credentials `step` checks, with its deadline as gfal2's timeout."""
        tpc_mode = step.mode if step.mode in ("pull", "push") else "auto"
        checksum = "both" if step.operation == "tpc" else "none"
        options = CopyOptions(tpc_mode=tpc_mode, checksum_mode=checksum, timeout=step.deadline)
        auth = dict(step.auth)
        credentials = {name: _only(c, auth.get(name, "")) for name, c in self.credentials.items()}
        if step.token_scope and self.tokens is not None:
            base = credentials[step.endpoint]
            credentials[step.endpoint] = self.tokens.credentials(step.endpoint, base, step.token_scope)
        return self.factory(options, list(credentials.values()))

    def run(self, step: Step) -> None:
        """Run the step under its deadline; the watch renews the lease and may stop it (cancel)."""
        tick = time.monotonic()
        operation = getattr(self, f"_{step.operation}")
        try:
            copier = self.copier(step)
            for url in filter(None, (step.source, step.destination)):
                self.confined(url)
            message = call_with_deadline(copier, lambda: operation(step, copier), step.deadline, tick=self.watch)
        except TokenError as exc:
            step.state, step.message = "failed", str(exc)
        except paths.PathRefused as exc:
            step.state, step.message = "failed", "refused: " + " ".join(exc.messages)
        except Stopped as stopped:
            step.stopped = True
            step.state, step.message = self._stopped(step, stopped)
        except OSError as exc:
            step.state, step.message = "failed", _words(exc)
        else:
            step.state, step.message = "passed", message
        step.seconds = round(time.monotonic() - tick, 3)

    def _stopped(self, step: Step, stopped: Stopped) -> tuple[str, str]:
        cancelled = f"was cancelled through {storage_library().name}"
        ended = "ignored the cancel and was left behind" if stopped.given_up else cancelled
        said = f"; the storage said: {_words(stopped.error)}" if isinstance(stopped.error, OSError) else ""
        if stopped.reason == "deadline":
            limit = f"{step.deadline} s deadline (the endpoint's timeout)"
            return "failed", f"No answer within the {limit}: the call {ended}{said}"
        if self.watch.cancelled:
            return "cancelled", f"Cancelled while it ran: the call {ended}"
        return "failed", f"Stopped: this worker lost the check's lease{said}"

    def confined(self, url: str, *, folder: bool = False) -> None:
        """The one path rule again, now that the URL is used: strictly below the check's folder
        (or that folder itself) on an endpoint that itself passes the rule (file://: links
        resolved on this worker)."""
        refusal = paths.PathRefused(f"{url} is below no readiness folder of the check's endpoints.")
        for endpoint_url, home in self.homes:
            try:
                paths.below_endpoint(home, endpoint_url, strict=True)
                paths.confine(url, home, strict=not folder)
                return
            except paths.PathRefused as exc:
                refusal = exc
        raise refusal

    def _proxy(self, step: Step, copier: Storage) -> str:
        path = Path(self.credentials[step.endpoint].x509_proxy)
        if not path.is_file():
            raise OSError(errno.ENOENT, f"the X.509 proxy {path} does not exist")
        if not os.access(path, os.R_OK):
            raise OSError(errno.EACCES, f"the X.509 proxy {path} is not readable by this worker")
        # No shell: the path is an argument. -checkend 0 exits 1 for a certificate already expired.
        out = subprocess.run(
            ["openssl", "x509", "-noout", "-enddate", "-checkend", "0", "-in", str(path)],
            capture_output=True, text=True, timeout=10, check=False,
        )  # fmt: skip
        if "notAfter=" not in out.stdout:
            raise OSError(0, f"the X.509 proxy {path} holds no certificate: {out.stderr.strip()[:200]}")
        until = out.stdout.split("notAfter=", 1)[1].splitlines()[0].strip()
        if out.returncode != 0:
            raise OSError(0, f"the X.509 proxy {path} expired at {until}")
        return f"{path}: valid until {until}"

    def _upload(self, step: Step, copier: Storage) -> str:
        copier.upload(str(self.local), step.destination)
        return f"{len(self.data):,} bytes written"

    def _refused(self, step: Step, copier: Storage) -> str:
        """A write the door must refuse: it passes when the door says no for want of permission."""
        try:
            copier.upload(str(self.local), step.destination)
        except OSError as exc:
            if categorize(exc.errno, _words(exc)) == ErrorCategory.PERMISSION_DENIED:
                return f"refused by the door, as it must be: {_words(exc)}"
            raise OSError(0, f"not refused for want of permission: {_words(exc)}") from None
        raise OSError(0, f"the door accepted it: {len(self.data):,} bytes written with a token that does not "
                         "allow this write (a door that accepts such tokens is a finding)")  # fmt: skip

    def _stat(self, step: Step, copier: Storage) -> str:
        size = copier.size_of(step.source)
        if size != len(self.data):
            raise OSError(0, f"the storage says {size:,} bytes; {len(self.data):,} were written")
        return f"{size:,} bytes"

    def _checksum(self, step: Step, copier: Storage) -> str:
        value = copier.checksum_of(step.source, "adler32").zfill(8)
        if value != self.adler32:
            raise OSError(0, f"the storage says adler32 {value}; the data written has {self.adler32}")
        return f"adler32 {value}, equal to the data written"

    def _download(self, step: Step, copier: Storage) -> str:
        target = self.scratch / f"download-{step.key.replace('/', '_')}"
        result = copier.copy(_job(step.source, f"file://{target}"))
        if not result.ok:
            raise OSError(result.code or 0, result.message)
        if target.read_bytes() != self.data:
            raise OSError(0, f"the {target.stat().st_size:,} bytes read back differ from the data written")
        return f"{len(self.data):,} bytes read back, equal to the data written"

    def _tpc(self, step: Step, copier: Storage) -> str:
        # gfal2 compares the source's and the destination's adler32 itself ("both").
        job = _job(step.source, step.destination, self.adler32)
        result = copier.copy(job)
        if not result.ok:
            raise OSError(result.code or 0, result.message)
        return f"copied as {result.copy_mode or 'reported by gfal2'}; adler32 {self.adler32} on both sides"

    def _delete(self, step: Step, copier: Storage) -> str:
        copier.remove(step.destination)
        try:
            copier.size_of(step.destination)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                return "deleted; a stat after it finds no file"
            raise
        raise OSError(0, "the storage still lists the file after deleting it")


def _only(credentials: EndpointCredentials, kind: str) -> EndpointCredentials:
    """The endpoint's credentials with only the kind a step checks (all of them for "")."""
    if kind == "token":
        return dataclasses.replace(credentials, x509_proxy="")
    if kind == "x509":
        return dataclasses.replace(credentials, bearer_token="")
    return credentials


def _job(source: str, destination: str, checksum: str = "") -> CopyJob:
    return CopyJob(id=0, index=0, source=source, destination=destination, size=PROBE_BYTES, step=0, attempt=1,
                   checksum=checksum)  # fmt: skip


def _words(exc: OSError) -> str:
    # XrdCl passes on the server's C string with its terminating NUL, escaped as the four
    # characters \x00: kept out, the rest is the storage's message as it came.
    text = (exc.strerror or str(exc)).replace("\\x00", "").replace("\x00", "")
    return text if not exc.errno else f"{text} (errno {exc.errno})"

"""The gfal2 engine: real copies through gfal2's Python bindings.

Each copy thread owns its gfal2 context. A context is cheap next to a transfer, it
lets a single in-flight copy be aborted (context.cancel() cancels everything on its
context), and some plugins keep per-context state that is not safe to share between
threads (the mock plugin's stat stage, for one).
"""

from __future__ import annotations

import os
import stat as stat_module
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TypeVar
from urllib.parse import urlsplit

from campaigns.choices import ErrorCategory
from campaigns.runs.engines.copies import CopyJob, CopyOptions, CopyResult, EndpointCredentials, TokenSource
from campaigns.runs.engines.errors import categorize
from campaigns.runs.engines.gfal2 import modes
from campaigns.runs.executors.deadline import DEADLINE_GRACE, DeadlineExceeded, with_deadline

try:  # Debian's python3-gfal2; absent only on machines that never run transfers.
    import gfal2
except ImportError:  # pragma: no cover - the install scripts always provide it
    gfal2 = None

# XrdCl (gfal2's root:// plugin, one per process) retries a refused connection only at the start
# of its next connection window, 120 s by default, and after five failed windows shuts the door
# out for 30 minutes: copies to a door restarted a few seconds ago hung until StorageOps gave
# them up, and a "retry failed" right after failed the same way. Short windows reach a door within
# seconds of its return. XrdCl reads these once, at its first use in the process (after this
# import); values set in the environment win. See docs/notes-xrootd-gfal2.md.
XRDCL_DEFAULTS = {"XRD_CONNECTIONWINDOW": "5", "XRD_CONNECTIONRETRY": "24", "XRD_STREAMERRORWINDOW": "5"}
for name, value in XRDCL_DEFAULTS.items():
    os.environ.setdefault(name, value)

# gfal2 loads its plugins and configuration on the first context of a process, and that
# first initialisation is not thread-safe: a freshly forked worker whose copy threads all
# created their contexts at once died with SIGSEGV. Contexts are made one at a time.
_CONTEXT_LOCK = threading.Lock()
_HTTP_COPY_MODES = {"pull": "3rd pull", "push": "3rd push", "streamed": "streamed"}
# Schemes whose gfal2 plugin writes an opened file straight to the storage. davix (davs://,
# https://) writes it into a local temp file of the full size and uploads that at close:
# no better than uploading a file of our own, whose size we can check against free space.
# What one read of a copy StorageOps streams itself asks for: large enough that the per-call
# cost vanishes next to the bytes, small enough to keep many copies' buffers in memory.
STREAM_CHUNK = 4 << 20
STREAMED_SCHEMES = frozenset({"root", "roots", "xroot", "xroots", "file"})
#: Seconds a namespace call around a run (stat, listing, mkdir, unlink, rmdir) may take at most;
#: the campaign's timeout when shorter. A checksum and a chunk's write get the whole timeout.
NAMESPACE_DEADLINE = 60.0
T = TypeVar("T")


def gfal2_version() -> str:
    return gfal2.get_version() if gfal2 else "unavailable"


class Gfal2Copier:
    """Runs copies with one campaign's options; safe to call from many threads at once."""

    # What a copy stopped at StorageOps' deadline is recorded as.
    timeout_category = ErrorCategory.TRANSFER_TIMEOUT

    def __init__(self, options: CopyOptions, credentials: Iterable[EndpointCredentials] = ()) -> None:
        if gfal2 is None:
            raise RuntimeError("gfal2's Python bindings are not installed (Debian package python3-gfal2)")
        self.options = options
        self.credentials = tuple(credentials)
        self.tokens: TokenSource | None = None
        self._local = threading.local()
        self._busy: dict[int, object] = {}
        self._busy_lock = threading.Lock()
        ca_dirs = {c.ca_dir for c in self.credentials if c.ca_dir}
        if ca_dirs:
            # The HTTP and XRootD plugins read the CA directory from the environment only.
            os.environ["X509_CERT_DIR"] = sorted(ca_dirs)[0]

    def use_tokens(self, tokens: TokenSource) -> None:
        """Send `tokens` (renewed while the run lives) to their endpoints from the next call on."""
        self.tokens = tokens

    # -- contexts -------------------------------------------------------------------------
    def _context(self, options: CopyOptions | None = None):
        """This thread's context and parameters for `options` (the run's by default): a sweep's
        step with other streams or another mode gets a context of its own, kept for its next copy."""
        options = options or self.options
        states = getattr(self._local, "states", None)
        if states is None:
            states = self._local.states = {}
        state = states.get(options)
        if state is None:
            with _CONTEXT_LOCK:
                ctx = gfal2.creat_context()
                self._configure(ctx, options)
            state = states[options] = [ctx, self._parameters(ctx, options), -1]
        if self.tokens is not None and state[2] != self.tokens.generation:
            # A context keeps the credentials it was set: a renewed token is set again.
            state[2] = self._set_tokens(state[0])
        return state[0], state[1]

    def _set_tokens(self, ctx) -> int:
        """Set the run's current tokens on `ctx`; returns the generation they are (at least)."""
        generation = self.tokens.generation
        for url, token in self.tokens.current():
            ctx.cred_set(url, ctx.cred_new("BEARER", token))
        return generation

    def _configure(self, ctx, options: CopyOptions | None = None) -> None:
        options = options or self.options
        # A credential-less HTTP TPC asks for a gridsite delegation XrdHttpTPC refuses, and
        # gfal2 would ask a server without macaroon support for a macaroon: see
        # docs/notes-xrootd-gfal2.md.
        ctx.set_opt_boolean("HTTP PLUGIN", "RETRIEVE_BEARER_TOKEN", False)
        if options.tpc_mode in _HTTP_COPY_MODES:
            ctx.set_opt_string("HTTP PLUGIN", "DEFAULT_COPY_MODE", _HTTP_COPY_MODES[options.tpc_mode])
            # With fallback on, a failed pull silently becomes push and then streamed, and the
            # campaign would measure a mode it did not ask for.
            ctx.set_opt_boolean("HTTP PLUGIN", "ENABLE_FALLBACK_TPC_COPY", False)
        if options.tpc_mode == "streamed":
            ctx.set_opt_boolean("XROOTD PLUGIN", "COPY_PASSTHROUGH", False)
        for cred in self.credentials:
            if cred.bearer_token:
                ctx.cred_set(cred.url, ctx.cred_new("BEARER", cred.bearer_token))
            if cred.x509_proxy:
                ctx.cred_set(cred.url, ctx.cred_new("X509_CERT", cred.x509_proxy))
                ctx.cred_set(cred.url, ctx.cred_new("X509_KEY", cred.x509_proxy))

    def _parameters(self, ctx, options: CopyOptions):
        params = ctx.transfer_parameters()
        params.overwrite = options.overwrite
        params.create_parent = options.create_parent
        params.timeout = options.timeout
        params.nbstreams = options.streams
        if options.tcp_buffer_size:
            params.tcp_buffersize = options.tcp_buffer_size
        if options.tpc_mode == "streamed":
            params.local_transfers = True
        if options.checksum_mode == "both":
            params.set_checksum(gfal2.checksum_mode.both, options.checksum_algorithm.upper(), "")
        return params

    # -- copying ----------------------------------------------------------------------------
    def copy(self, job: CopyJob) -> CopyResult:
        ctx, params = self._context(job.options)
        seen: dict[str, str] = {}

        def on_event(event) -> None:
            # gfal2 says which copy mode it really used ("3rd pull", "3rd push", "streamed"):
            # the record proves the mode instead of trusting the configuration.
            if event.stage == "TRANSFER:TYPE":
                seen["mode"] = event.description

        params.event_callback = on_event
        if self.options.checksum_mode in ("source", "target"):
            # gfal2 compares one side against a value we give: the generated data's checksum.
            mode = getattr(gfal2.checksum_mode, self.options.checksum_mode)
            params.set_checksum(mode, self.options.checksum_algorithm.upper(), job.checksum)
        elif self.options.checksum_mode == "both":
            # Both sides, and each against the data's known checksum (generated, or the listing's)
            # when there is one: a source rewritten since it was listed is a mismatch, not a copy
            # recorded with a checksum it does not have. Without it, only a door that still served
            # its cached checksum of the old bytes caught that. The parameters are this thread's,
            # so each copy sets its own value.
            params.set_checksum(gfal2.checksum_mode.both, self.options.checksum_algorithm.upper(), job.checksum or "")
        started = time.time()
        tick = time.monotonic()
        options = job.options or self.options
        try:
            with self.in_flight(ctx):
                if modes.streams_itself(options.tpc_mode, job.source, job.destination):
                    seen["mode"] = self._stream(ctx, job, options)
                else:
                    ctx.filecopy(params, job.source, job.destination)
        except gfal2.GError as exc:
            duration = time.monotonic() - tick
            message = str(exc.message if hasattr(exc, "message") else exc)
            return CopyResult(
                job,
                False,
                started,
                time.time(),
                duration,
                code=exc.code,
                message=message,
                category=categorize(exc.code, message),
                copy_mode=seen.get("mode", ""),
                source_checksum=job.checksum,
            )
        duration = time.monotonic() - tick
        if problem := modes.mode_mismatch(options.tpc_mode, seen.get("mode", "")):
            return CopyResult(
                job, False, started, time.time(), duration, message=problem,
                category=ErrorCategory.MODE_NOT_HONOURED, copy_mode=seen["mode"], source_checksum=job.checksum,
            )  # fmt: skip
        verified = self.options.checksum_mode in ("target", "both") and job.checksum
        return CopyResult(
            job,
            True,
            started,
            time.time(),
            duration,
            copy_mode=seen.get("mode", ""),
            source_checksum=job.checksum,
            # gfal2 checked the destination equals the known source checksum: record it.
            destination_checksum=job.checksum if verified else "",
        )

    def _stream(self, ctx, job: CopyJob, options: CopyOptions) -> str:
        """Copy `job` through this process with gfal2's file calls and return the mode it was
        ("streamed"). gfal2's XRootD plugin runs a third-party copy between any two root:// doors
        (no option turns it off), so a streamed campaign between them streams here: the bytes
        pass through this process's sockets, as the mode says. The checks gfal2 makes for a
        filecopy are made the same way: overwrite, parents, the size, the checksums asked for."""
        if not options.overwrite:
            try:
                ctx.stat(job.destination)
            except gfal2.GError:
                pass
            else:
                raise gfal2.GError(f"file exists: {job.destination} and overwrite is not enabled", 17)
        if options.create_parent:
            ctx.mkdir_rec(job.destination.rsplit("/", 1)[0], 0o755)
        reader = ctx.open(job.source, "r")
        writer = ctx.open(job.destination, "w")
        copied = 0
        try:
            while chunk := reader.read_bytes(STREAM_CHUNK):
                writer.write(chunk)
                copied += len(chunk)
        finally:
            # The binding closes a file when its object goes; a failed close shows in the size below.
            del reader, writer
        written = ctx.stat(job.destination).st_size
        if written != copied:
            raise gfal2.GError(f"{job.destination}: {written} bytes on the storage after streaming {copied}", 5)
        self._check_streamed(ctx, job, options)
        return "streamed"

    @staticmethod
    def _check_streamed(ctx, job: CopyJob, options: CopyOptions) -> None:
        """The checksum comparison gfal2 makes after a filecopy, for a copy streamed here."""
        if options.checksum_mode == "none":
            return
        algorithm = options.checksum_algorithm.upper()
        expected = job.checksum.lower().lstrip("0") if job.checksum else ""
        sides = {"source": (job.source,), "target": (job.destination,)}.get(
            options.checksum_mode, (job.source, job.destination)
        )
        answers = {url: ctx.checksum(url, algorithm).strip().lower().lstrip("0") for url in sides}
        if options.checksum_mode == "both" and len(set(answers.values())) > 1:
            raise gfal2.GError(f"{algorithm} checksums differ: source {answers[job.source]}, "
                               f"destination {answers[job.destination]}", 74)  # fmt: skip
        for url, answer in answers.items():
            if expected and answer != expected:
                raise gfal2.GError(f"{algorithm} checksum mismatch: {url} has {answer}, the data {expected}", 74)

    @contextmanager
    def in_flight(self, ctx) -> Iterator[None]:
        """Register this thread's context as busy, so cancel_all() can abort what it runs."""
        key = threading.get_ident()
        with self._busy_lock:
            self._busy[key] = ctx
        try:
            yield
        finally:
            with self._busy_lock:
                self._busy.pop(key, None)

    def cancel_thread(self, ident: int) -> bool:
        """Abort the copy thread `ident` is running (its own context only)."""
        with self._busy_lock:
            ctx = self._busy.get(ident)
        if ctx is None:
            return False
        ctx.cancel()
        return True

    def cancel_all(self) -> int:
        """Abort every copy in flight (each on its own context); returns how many."""
        with self._busy_lock:
            contexts = list(self._busy.values())
        for ctx in contexts:
            ctx.cancel()
        return len(contexts)

    # -- helpers used around a run ------------------------------------------------------------
    # Each gfal2 call here runs under a deadline of StorageOps' own (deadline.with_deadline):
    # a door that accepts and never answers must not hold a run's preparation or clean-up.
    def _fresh_context(self):
        with _CONTEXT_LOCK:
            ctx = gfal2.creat_context()
            self._configure(ctx)
        if self.tokens is not None:
            self._set_tokens(ctx)
        return ctx

    def _deadline(self, ctx, call: Callable[[], T], what: str, seconds: float | None = None) -> T:
        """``call()`` on ``ctx`` within ``seconds`` (a namespace call's deadline by default);
        a context cancelled at its deadline is never used again."""
        seconds = seconds if seconds is not None else min(self.options.timeout, NAMESPACE_DEADLINE)
        try:
            return with_deadline(ctx, call, seconds, what)
        except DeadlineExceeded:
            self._local.states = {}  # this thread's contexts, the cancelled one among them
            raise

    def upload(self, local_path: str, url: str) -> None:
        """Copy a local file to `url` (creating source files before a run); raises OSError on
        failure, DeadlineExceeded past the campaign's timeout. cancel_all() aborts it."""
        ctx = self._fresh_context()
        params = ctx.transfer_parameters()
        params.overwrite = True
        params.create_parent = True
        params.timeout = self.options.timeout
        with self.in_flight(ctx), _as_os_error():
            self._deadline(ctx, lambda: ctx.filecopy(params, f"file://{local_path}", url), f"upload to {url}",
                           self.options.timeout + DEADLINE_GRACE)  # fmt: skip

    @staticmethod
    def streams(url: str) -> bool:
        """True if write() sends the data to `url` without a local copy of the whole file."""
        return urlsplit(url).scheme in STREAMED_SCHEMES

    def write(self, url: str, chunks: Iterable[bytes], size: int) -> None:
        """Write `chunks` (`size` bytes in all) to the file `url`, replacing it, parents created.

        The chunks are pulled one at a time, so their producer may stop the write between two
        of them by raising; cancel_all() aborts one gfal2 is stuck in, and each call has a
        deadline (a chunk's write: the campaign's timeout). OSError on failure.
        """
        ctx = self._fresh_context()
        folder = url.rsplit("/", 1)[0]
        with self.in_flight(ctx), _as_os_error():
            self._deadline(ctx, lambda: ctx.mkdir_rec(folder, 0o755), f"mkdir {folder}")
            handle = self._deadline(ctx, lambda: ctx.open(url, "w"), f"open {url}")
            try:
                for chunk in chunks:
                    self._deadline(ctx, lambda chunk=chunk, handle=handle: handle.write(chunk), f"write to {url}",
                                   self.options.timeout)  # fmt: skip
            finally:
                # The binding closes the file when its object goes; a failed close is not
                # reported there, hence the size checked below.
                del handle
            written = self._deadline(ctx, lambda: ctx.stat(url).st_size, f"stat {url}")
        if written != size:
            raise OSError(0, f"{url}: {written} bytes on the storage after writing {size}")

    @contextmanager
    def _namespace_context(self) -> Iterator[object]:
        """This thread's context for a stat, checksum, listing or delete, registered as busy so
        that cancel_all() reaches these too (a deadline kept by the caller: deadline.py)."""
        ctx = self._context()[0]
        with self.in_flight(ctx), _as_os_error():
            yield ctx

    def size_of(self, url: str) -> int:
        """The file's size on the storage (clean-up's first proof); OSError with gfal2's errno."""
        with self._namespace_context() as ctx:
            return self._deadline(ctx, lambda: ctx.stat(url).st_size, f"stat {url}")

    def checksum_of(self, url: str, algorithm: str) -> str:
        """The storage's own checksum of the file (clean-up's second proof), within the
        campaign's timeout: a door computes it over the whole file."""
        with self._namespace_context() as ctx:
            answer = self._deadline(ctx, lambda: ctx.checksum(url, algorithm), f"{algorithm} checksum of {url}",
                                    self.options.timeout)  # fmt: skip
        return answer.lower()

    def list_files(self, url: str) -> list[tuple[str, int]]:
        """The regular files directly in a folder, (name, size), sorted by name; sub-folders and
        other entries are left out. OSError with gfal2's errno and message."""
        folder = url if url.endswith("/") else url + "/"
        with self._namespace_context() as ctx:
            found = []
            for name in sorted(self._deadline(ctx, lambda: ctx.listdir(folder), f"listing of {folder}")):
                if name in (".", ".."):
                    continue
                info = self._deadline(ctx, lambda name=name: ctx.stat(folder + name), f"stat {folder}{name}")
                if stat_module.S_ISREG(info.st_mode):
                    found.append((name, info.st_size))
            return found

    def remove(self, url: str) -> None:
        """Delete one file (clean-up after a run); raises OSError with gfal2's errno and message."""
        self._namespace_call("unlink", url)

    def remove_folder(self, url: str) -> None:
        """Remove an empty folder; raises OSError (not empty, unsupported by the plugin, ...)."""
        self._namespace_call("rmdir", url)

    def _namespace_call(self, operation: str, url: str) -> None:
        with self._namespace_context() as ctx:
            self._deadline(ctx, lambda: getattr(ctx, operation)(url), f"{operation} {url}")


@contextmanager
def _as_os_error() -> Iterator[None]:
    """gfal2's errors as OSError with its errno and message: what callers around a run catch."""
    try:
        yield
    except gfal2.GError as exc:
        raise OSError(exc.code, str(getattr(exc, "message", exc))) from None

"""Copies through XRootD's own client library: one XrdCl CopyProcess per copy (what `xrdcp`
runs for one file), in a copy thread of `campaigns.runs.executors.copy_threads`.

A copy thread blocks in CopyProcess.run, which XrdCl drives from its own threads; the progress
handler it calls is the only way in while it runs. Its `should_cancel` answers from a flag this
copier sets for one thread (StorageOps' deadline, `cancel_thread`) or for all (a run's cancel,
`cancel_all`): a streamed copy stops at its next chunk; a third-party copy is cancelled on the
destination door (`ofs.tpc cancel`) at XrdCl's next look, which it takes once a second, so a
third-party copy also never takes less than a second.

The low-level binding (`pyxrootd.client`) is called with keywords: the `XRootD.client` wrapper of
5.5.3 hands `retry`, `xrateThreshold` and `xrate` to add_job one place off, which would make a
rate limit a retry count.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from campaigns.choices import ErrorCategory
from campaigns.runs.engines.copies import CopyJob, CopyOptions, CopyResult
from campaigns.runs.engines.xrootd.errors import categorize_status
from campaigns.runs.engines.xrootd.modes import STREAMED_MODE, THIRD_PARTY, TPC_MODE
from campaigns.runs.engines.xrootd.options import XRootDOptions


def _bindings() -> tuple[Any, Any]:
    """XRootD's bindings (Debian's python3-xrootd), imported by the first copier, never at import
    time: importing XRootD.client registers an exit handler that calls isinstance() on every
    object the process holds, which evaluates the lazy objects a web process keeps (django-csp's
    nonce raised in every gunicorn worker at exit), and web processes make no copies."""
    try:
        from pyxrootd import client
        from XRootD.client.env import EnvPutInt
    except ImportError:  # pragma: no cover - the install scripts always provide it
        raise RuntimeError("XRootD's Python bindings are not installed (Debian package python3-xrootd)") from None
    return client, EnvPutInt


# XrdCl keeps its timeouts in unsigned 16-bit seconds.
MAX_XRDCL_SECONDS = 65535
# XrdCl marks both URLs of a job it runs as a third-party copy.
TPC_INTENT = "xrdcl.intent=tpc"


class _Progress:
    """CopyProcess's progress handler for one copy: it learns the mode XrdCl chose and tells it to stop."""

    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop
        self.mode = ""

    def begin(self, job_id: int, total: int, source: str, target: str) -> None:
        # With thirdparty "first" XrdCl falls back to streaming when the doors cannot pull: the
        # record says which it was.
        self.mode = TPC_MODE if TPC_INTENT in str(target) else STREAMED_MODE

    def end(self, job_id: int, results: dict) -> None:
        return None

    def update(self, job_id: int, processed: int, total: int) -> None:
        return None

    def should_cancel(self, job_id: int) -> bool:
        return self.stop.is_set()


# Checksums of a fixed width, which XrdCl prints without their leading zeros ("adler32:88ce912").
_HEX_WIDTH = {"adler32": 8, "crc32": 8, "md5": 32}


def _checksum_value(answer: Any) -> str:
    """XrdCl's "adler32:88ce912" in StorageOps' notation (campaigns.runs.sources): "088ce912"."""
    algorithm, _, value = str(answer or "").partition(":")
    value = value.strip().lower()
    return value.zfill(_HEX_WIDTH.get(algorithm.strip().lower(), 0)) if value else ""


class XRootDCopier:
    """Runs copies with one run's options; safe to call from many threads at once."""

    timeout_category = ErrorCategory.TRANSFER_TIMEOUT

    def __init__(self, options: CopyOptions, engine_options: XRootDOptions | None = None) -> None:
        self._xrdcl, put_int = _bindings()
        self.options = options
        self.engine_options = engine_options or XRootDOptions()
        self._stops: dict[int, threading.Event] = {}
        self._lock = threading.Lock()
        # XrdCl opens one connection per door for the whole process and reads this when it opens
        # it: the run's streams apply to connections opened from now on (docs/xrootd-engine.md).
        put_int("SubStreamsPerChannel", max(options.streams, 1))

    # -- cancelling ---------------------------------------------------------------------------
    @contextmanager
    def _cancellable(self) -> Iterator[threading.Event]:
        stop = threading.Event()
        key = threading.get_ident()
        with self._lock:
            self._stops[key] = stop
        try:
            yield stop
        finally:
            with self._lock:
                self._stops.pop(key, None)

    def cancel_thread(self, ident: int) -> bool:
        with self._lock:
            stop = self._stops.get(ident)
        if stop is None:
            return False
        stop.set()
        return True

    def cancel_all(self) -> int:
        with self._lock:
            stops = list(self._stops.values())
        for stop in stops:
            stop.set()
        return len(stops)

    # -- copying ------------------------------------------------------------------------------
    def _job(self, job: CopyJob, options: CopyOptions) -> dict[str, Any]:
        seconds = min(options.timeout, MAX_XRDCL_SECONDS)
        checked = options.checksum_mode != "none"
        return {
            "source": job.source,
            "target": job.destination,
            "force": options.overwrite,
            "mkdir": options.create_parent,
            "thirdparty": THIRD_PARTY.get(options.tpc_mode, THIRD_PARTY["auto"]),
            # XrdCl compares the two sides only end to end; "target" compares the destination
            # with the data's known checksum, given as the source's, without reading the source.
            "checksummode": "end2end" if checked else "none",
            "checksumtype": options.checksum_algorithm.lower() if checked else "",
            "checksumpreset": job.checksum if options.checksum_mode == "target" else "",
            "chunksize": self.engine_options.chunk_size,
            "parallelchunks": self.engine_options.parallel_chunks,
            "xrate": self.engine_options.xrate,
            # XrdCl's own limits, each the campaign's timeout: it gets the first chance to say
            # why; StorageOps' deadline (the copy threads') cancels a little later whatever it does.
            "inittimeout": seconds,
            "tpctimeout": seconds,
            "cptimeout": seconds,
        }

    def copy(self, job: CopyJob) -> CopyResult:
        options = job.options or self.options
        process = self._xrdcl.CopyProcess()
        process.add_job(**self._job(job, options))
        started = time.time()
        tick = time.monotonic()
        with self._cancellable() as stop:
            progress = _Progress(stop)
            status = process.prepare()
            results: list[dict] = []
            if status["ok"]:
                status, results = process.run(progress)
        duration = time.monotonic() - tick
        outcome = results[0] if results else {}
        status = outcome.get("status") or status
        sums = {
            "source_checksum": _checksum_value(outcome.get("sourceCheckSum")) or job.checksum,
            "destination_checksum": _checksum_value(outcome.get("targetCheckSum")),
        }
        if not status["ok"]:
            message = status["message"].strip()
            category, code = categorize_status(status["code"], status["errno"], message)
            return CopyResult(
                job, False, started, time.time(), duration, code=code, message=message, category=category,
                copy_mode=progress.mode, **sums,
            )  # fmt: skip
        result = CopyResult(job, True, started, time.time(), duration, copy_mode=progress.mode, **sums)
        if problem := self._differs(job, options, result):
            result.ok, result.category, result.message = False, ErrorCategory.CHECKSUM_MISMATCH, problem
        return result

    @staticmethod
    def _differs(job: CopyJob, options: CopyOptions, result: CopyResult) -> str:
        """XrdCl compared the two sides; this compares them with the data StorageOps wrote, when known."""
        if options.checksum_mode == "none" or not job.checksum:
            return ""
        expected, algorithm = job.checksum.lower().lstrip("0"), options.checksum_algorithm
        for side, answer in (("source", result.source_checksum), ("destination", result.destination_checksum)):
            if answer and answer.lstrip("0") != expected:
                return f"{algorithm} checksum mismatch: the {side} has {answer}, the data {job.checksum}"
        return ""

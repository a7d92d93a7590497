"""Create a run's source files on the source endpoints before it starts.

The data is pseudo-random bytes, so compression on the storage side cannot flatter the
figures. It is a function of the plan's seed and the file's size alone: files of one size
share their content (and checksum, which source-only and target-only verification compare
against), and a retry or a resumed preparation writes exactly what its first run wrote.

Where gfal2 writes a file straight to the storage (root://, file://), the data is streamed to
it as it is generated; elsewhere (davs://: davix would buffer it in a temp file anyway) one
local file per size is generated and uploaded, once the temp dir is seen to have room for it.

The uploads run in threads; the driver's thread stays free to renew the run's lease and look
for a cancel (`control`, called every CONTROL_SECONDS), so preparing a run of any size is
neither taken over by another driver nor deaf to its operator.
"""

from __future__ import annotations

import hashlib
import logging
import random
import shutil
import tempfile
import threading
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path

from campaigns.runs.planning import source_files
from campaigns.spec import RunSpec

log = logging.getLogger(__name__)
_CHUNK = 4 * 1024 * 1024
UPLOAD_CONCURRENCY = 8
CONTROL_SECONDS = 0.5
# Room left free in the temp dir beyond the files themselves, for whatever else uses it.
TEMP_MARGIN = 256 * 1024 * 1024
# After a stop, how long the uploads get to notice it before the driver goes on without them.
STOP_WAIT_SECONDS = 10.0


class PreparationStopped(Exception):
    """Preparation ended before the run could start; `reason` is the run's stop reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class PreparationCancelled(PreparationStopped):
    def __init__(self) -> None:
        super().__init__("cancelled during preparation")


class PreparationFailed(PreparationStopped):
    """The sources could not be created (no room for them, an upload refused)."""


class _Stopped(Exception):
    """Raised inside an upload thread once the preparation is stopping."""


class _Checksum:
    """Running checksum in gfal2's notation (lower-case hex, adler32/crc32 8 digits)."""

    def __init__(self, algorithm: str) -> None:
        self.algorithm = algorithm
        self.value = 1 if algorithm == "adler32" else 0
        self.md5 = hashlib.md5(usedforsecurity=False) if algorithm == "md5" else None

    def update(self, data: bytes) -> None:
        if self.md5 is not None:
            self.md5.update(data)
        elif self.algorithm == "adler32":
            self.value = zlib.adler32(data, self.value)
        else:
            self.value = zlib.crc32(data, self.value)

    def hexdigest(self) -> str:
        return self.md5.hexdigest() if self.md5 is not None else f"{self.value:08x}"


class _Maker:
    """The data of one plan: per size, the same bytes wherever they are written."""

    def __init__(self, seed: int, algorithm: str, stop: threading.Event, tmp: Path) -> None:
        self.seed, self.algorithm, self.stop, self.tmp = seed, algorithm, stop, tmp
        self.checksums: dict[int, str] = {}
        self.local: dict[int, Path] = {}
        self.lock = threading.Lock()
        self.size_locks: dict[int, threading.Lock] = {}

    def chunks(self, size: int) -> Iterator[bytes]:
        # A string seed is hashed with SHA-512: the same stream in every process.
        rng = random.Random(f"storageops-source:{self.seed}:{size}")
        checksum = _Checksum(self.algorithm)
        left = size
        while left > 0:
            if self.stop.is_set():
                raise _Stopped
            chunk = rng.randbytes(min(_CHUNK, left))
            checksum.update(chunk)
            left -= len(chunk)
            yield chunk
        with self.lock:
            self.checksums[size] = checksum.hexdigest()

    def local_file(self, size: int) -> Path:
        """The temp file of `size` bytes, made by the first upload that needs it."""
        with self.lock:
            size_lock = self.size_locks.setdefault(size, threading.Lock())
        with size_lock:
            if size not in self.local:
                path = self.tmp / f"data-{size}"
                with path.open("wb") as handle:
                    for chunk in self.chunks(size):
                        handle.write(chunk)
                self.local[size] = path
        return self.local[size]


def create_sources(snapshot: dict, run_id: int, copier, control: Callable[[], None] = lambda: None) -> dict[int, str]:
    """Write every distinct source file of the plan (mock:// needs none); returns the checksum
    of the data of each size.

    `control` is called from this thread every CONTROL_SECONDS while the files are written: it
    renews the lease and raises to stop (LeaseLost, PreparationCancelled), which cancels the
    uploads in flight. PreparationFailed when the sources cannot be made.
    """
    targets = {url: size for url, size in source_files(snapshot, run_id).items() if not url.startswith("mock:")}
    if not targets:
        return {}
    spec = RunSpec.from_snapshot(snapshot)
    seed = spec.retry.seed if spec.retry is not None else run_id
    with tempfile.TemporaryDirectory(prefix="storageops-src-") as tmp:
        _check_room(Path(tmp), {size for url, size in targets.items() if not copier.streams(url)})
        maker = _Maker(seed, spec.checksum_algorithm, threading.Event(), Path(tmp))
        _run_uploads(targets, copier, maker, control)
    log.info("run %s: %d source files written", run_id, len(targets))
    return maker.checksums


def _check_room(tmp: Path, sizes: set[int]) -> None:
    need = sum(sizes)
    if not need:
        return
    free = shutil.disk_usage(tmp).free
    if need + TEMP_MARGIN > free:
        raise PreparationFailed(
            f"no room to generate the source files: they need {need:,} bytes in {tmp.parent} "
            f"(plus {TEMP_MARGIN:,} kept free), which has {free:,} free"
        )


def _upload(copier, maker: _Maker, url: str, size: int) -> None:
    try:
        if copier.streams(url):
            copier.write(url, maker.chunks(size), size)
        else:
            copier.upload(str(maker.local_file(size)), url)
    except OSError as exc:
        if maker.stop.is_set():
            raise _Stopped from None  # the cancel's own doing
        raise PreparationFailed(f"could not write source {url}: {exc.strerror or exc}") from None


def _run_uploads(targets: dict[str, int], copier, maker: _Maker, control: Callable[[], None]) -> None:
    pool = ThreadPoolExecutor(max_workers=UPLOAD_CONCURRENCY, thread_name_prefix="sources")
    pending: set[Future] = {pool.submit(_upload, copier, maker, url, size) for url, size in targets.items()}
    try:
        while pending:
            done, pending = wait(pending, timeout=CONTROL_SECONDS, return_when=FIRST_COMPLETED)
            for future in done:
                future.result()  # a run must not start on missing sources
            control()
    except BaseException:
        _stop(pool, pending, copier, maker)
        raise
    pool.shutdown()


def _stop(pool: ThreadPoolExecutor, pending: set[Future], copier, maker: _Maker) -> None:
    """Stop the uploads: queued ones never start, streamed ones end at their next chunk, and
    gfal2 aborts the rest (from a thread of its own: its cancel can block)."""
    maker.stop.set()
    pool.shutdown(wait=False, cancel_futures=True)
    running = [f for f in pending if not f.cancelled()]

    def abort() -> None:
        # Again each second: an upload that had not yet registered its context is caught next time.
        for _ in range(int(STOP_WAIT_SECONDS)):
            copier.cancel_all()
            if not wait(running, timeout=1.0).not_done:
                return

    threading.Thread(target=abort, name="sources-cancel", daemon=True).start()
    _, late = wait(running, timeout=STOP_WAIT_SECONDS)
    if late:
        log.warning("%d source uploads still running %.0f s after their stop", len(late), STOP_WAIT_SECONDS)

"""Create a campaign's source files on the source endpoints before a run.

Files are generated locally from random bytes, so compression on the storage side cannot
flatter the figures (files of one size share their content: a backend that deduplicates
would see them as equal), and uploaded through the same engine as the run.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from campaigns.runs.planning import source_files
from campaigns.spec import RunSpec

log = logging.getLogger(__name__)
_CHUNK = 4 * 1024 * 1024
UPLOAD_CONCURRENCY = 8


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


def _generate(path: Path, size: int, algorithm: str) -> str:
    checksum = _Checksum(algorithm)
    with path.open("wb") as handle:
        left = size
        while left > 0:
            chunk = os.urandom(min(_CHUNK, left))
            handle.write(chunk)
            checksum.update(chunk)
            left -= len(chunk)
    return checksum.hexdigest()


def create_sources(snapshot: dict, run_id: int, copier) -> dict[int, str]:
    """Upload one generated file per distinct source URL of the plan; mock:// needs none.

    Returns the checksum of the data of each size, which is what source-only and
    target-only verification compare against.
    """
    targets = {url: size for url, size in source_files(snapshot, run_id).items() if not url.startswith("mock:")}
    if not targets:
        return {}
    algorithm = RunSpec.from_snapshot(snapshot).checksum_algorithm
    checksums: dict[int, str] = {}
    with tempfile.TemporaryDirectory(prefix="storageops-src-") as tmp:
        local: dict[int, Path] = {}
        for size in set(targets.values()):
            local[size] = Path(tmp) / f"data-{size}"
            checksums[size] = _generate(local[size], size, algorithm)
        with ThreadPoolExecutor(max_workers=UPLOAD_CONCURRENCY) as pool:
            # list() re-raises the first failed upload: a run must not start on missing sources.
            list(pool.map(lambda item: copier.upload(str(local[item[1]]), item[0]), targets.items()))
    log.info("run %s: %d source files uploaded", run_id, len(targets))
    return checksums

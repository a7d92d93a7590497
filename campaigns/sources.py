"""Create a campaign's source files on the source endpoints before a run.

Files are generated locally from random bytes, so compression on the storage side cannot
flatter the figures (files of one size share their content: a backend that deduplicates
would see them as equal), and uploaded through the same engine as the run.
"""

from __future__ import annotations

import logging
import os
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from campaigns.planning import source_files

log = logging.getLogger(__name__)
_CHUNK = 4 * 1024 * 1024
UPLOAD_CONCURRENCY = 8


def _generate(path: Path, size: int) -> None:
    with path.open("wb") as handle:
        left = size
        while left > 0:
            n = min(_CHUNK, left)
            handle.write(os.urandom(n))
            left -= n


def create_sources(snapshot: dict, run_id: int, copier) -> int:
    """Upload one generated file per distinct source URL of the plan; mock:// needs none."""
    targets = {url: size for url, size in source_files(snapshot, run_id).items() if not url.startswith("mock:")}
    if not targets:
        return 0
    with tempfile.TemporaryDirectory(prefix="storageops-src-") as tmp:
        local: dict[int, Path] = {}
        for size in set(targets.values()):
            local[size] = Path(tmp) / f"data-{size}"
            _generate(local[size], size)
        with ThreadPoolExecutor(max_workers=UPLOAD_CONCURRENCY) as pool:
            # list() re-raises the first failed upload: a run must not start on missing sources.
            list(pool.map(lambda item: copier.upload(str(local[item[1]]), item[0]), targets.items()))
    log.info("run %s: %d source files uploaded", run_id, len(targets))
    return len(targets)

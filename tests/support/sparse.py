"""Files a checksum load asks about, made as holes on tmpfs: reading them costs the door CPU
only (no disk, no page cache), so a door's checksum work can be loaded without gigabytes."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from devsite.xrootd_server import XRootDServer, make_traversable


@contextmanager
def tmpfs_dir(prefix: str) -> Iterator[Path]:
    """A fresh directory on /dev/shm the server user can reach; removed afterwards."""
    base = Path("/dev/shm") / f"{prefix}-{uuid.uuid4().hex[:8]}"
    base.mkdir()
    try:
        make_traversable(base)
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def has_tmpfs() -> bool:
    return Path("/dev/shm").is_dir()


def sparse_sources(server: XRootDServer, source_path: str, count: int, size: int) -> None:
    """The files of a checksum-load plan (source_path/size/src-NNNNNNN) on one door, as holes."""
    for number in range(count):
        os.truncate(server.write_local(f"/data/{source_path}/{size}/src-{number:07d}", b""), size)

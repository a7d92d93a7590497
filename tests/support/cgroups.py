"""A throw-away cgroup v1 cpu group: a process gets a fixed CPU share whatever else runs.

Pinning a door to a core (taskset) confines it only while nothing else wants that core; a CFS
quota confines it by CPU time, and high shares give it that time however busy the machine is.
Each group is named after this test process, so parallel sessions never share or remove one
another's, and a group left behind by a killed session is removed by the next one.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

CPU_CGROUP = Path("/sys/fs/cgroup/cpu")
PREFIX = "storageops-test-"
PERIOD_US = 100_000


class CpuGroup:
    def __init__(self, path: Path) -> None:
        self.path = path

    def add(self, pid: int) -> None:
        """Move a process, all its threads with it, into the group."""
        (self.path / "cgroup.procs").write_text(f"{pid}\n")

    def set_quota(self, quota_cores: float | None) -> None:
        """Give the group another share of a core (None: no quota); its processes feel it at once."""
        (self.path / "cpu.cfs_quota_us").write_text(f"{_quota_us(quota_cores)}\n")

    def pids(self) -> list[int]:
        return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]


def _writable_reason() -> str | None:
    if not (CPU_CGROUP / "cpu.cfs_quota_us").exists():
        return f"no cgroup v1 cpu controller at {CPU_CGROUP} (cpu.cfs_quota_us missing)"
    if not os.access(CPU_CGROUP, os.W_OK):
        return f"{CPU_CGROUP} is not writable by uid {os.geteuid()}"
    return None


def _remove_stale() -> None:
    for group in CPU_CGROUP.glob(f"{PREFIX}*"):
        owner = group.name.removeprefix(PREFIX).split("-")[0]
        if owner.isdigit() and not Path(f"/proc/{owner}").exists():
            with contextlib.suppress(OSError):
                _release(group)


def _release(group: Path) -> None:
    # A cgroup can only be removed once empty: its child groups first, its processes back to the parent.
    for child in group.glob(f"{PREFIX}*"):
        _release(child)
    for _ in range(50):
        for pid in (group / "cgroup.procs").read_text().split():
            with contextlib.suppress(ProcessLookupError):
                (group.parent / "cgroup.procs").write_text(f"{pid}\n")
        try:
            group.rmdir()
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY:
                raise
        time.sleep(0.1)  # a process forked while we moved the others
    group.rmdir()


def _quota_us(quota_cores: float | None) -> int:
    return -1 if quota_cores is None else max(int(quota_cores * PERIOD_US), 1000)


@contextlib.contextmanager
def cpu_cgroup(
    name: str, quota_cores: float | None = None, shares: int = 1024, parent: CpuGroup | None = None
) -> Iterator[CpuGroup]:
    """A cpu cgroup allowed ``quota_cores`` of one core (None: no quota) with ``shares``; inside
    ``parent``, its shares divide the parent's time with its siblings only.

    Skips the test, saying why, where no cpu cgroup can be created: the experiments that need
    one would otherwise measure whatever else the machine was doing.
    """
    if reason := _writable_reason():
        pytest.skip(f"needs a writable cgroup v1 cpu controller: {reason}")
    _remove_stale()
    path = (parent.path if parent else CPU_CGROUP) / f"{PREFIX}{os.getpid()}-{name}-{secrets.token_hex(3)}"
    try:
        path.mkdir()
    except OSError as exc:
        pytest.skip(f"needs a writable cgroup v1 cpu controller: cannot create {path}: {exc}")
    try:
        (path / "cpu.cfs_period_us").write_text(f"{PERIOD_US}\n")
        (path / "cpu.cfs_quota_us").write_text(f"{_quota_us(quota_cores)}\n")
        (path / "cpu.shares").write_text(f"{shares}\n")
        yield CpuGroup(path)
    finally:
        _release(path)

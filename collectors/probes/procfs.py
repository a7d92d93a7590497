"""Raw counters from /proc and /sys, read the way the kernel documents them (proc(5)).

Everything here returns plain numbers (cumulative counters or gauges) and keeps no state:
turning counters into rates is the sampler's job, which knows the previous values.
psutil would do the same with more code paths and a dependency; what we need is a few
text files, and reading them directly keeps one tick well under a millisecond.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
CLK_TCK = os.sysconf("SC_CLK_TCK")
SECTOR = 512  # /proc/diskstats counts 512-byte sectors whatever the device's real sector size


@dataclass(frozen=True)
class CpuTimes:
    busy: float  # seconds, all cores together
    total: float


def _cpu_line(fields: list[str]) -> CpuTimes:
    # user nice system idle iowait irq softirq steal [guest guest_nice]: guest time is
    # already included in user/nice, so only the first eight are summed; idle and iowait
    # are the not-busy part.
    values = [int(v) for v in fields[1:9]]
    total = sum(values)
    idle = values[3] + values[4]
    return CpuTimes(busy=(total - idle) / CLK_TCK, total=total / CLK_TCK)


def cpu_times() -> CpuTimes:
    """The aggregate "cpu" line of /proc/stat: all cores together."""
    return _cpu_line((PROC / "stat").read_text().split("\n", 1)[0].split())


def boot_time() -> int:
    """Boot time, seconds since the epoch (btime of /proc/stat): changes only on reboot."""
    for line in (PROC / "stat").read_text().splitlines():
        if line.startswith("btime "):
            return int(line.split()[1])
    raise RuntimeError("/proc/stat has no btime line")


def load_average() -> tuple[float, float, float]:
    one, five, fifteen = (PROC / "loadavg").read_text().split()[:3]
    return float(one), float(five), float(fifteen)


def memory() -> dict[str, int]:
    """used and cached bytes, computed like free(1): used excludes buffers and page cache."""
    info: dict[str, int] = {}
    for line in (PROC / "meminfo").read_text().splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts:
            info[key] = int(parts[0]) * 1024  # the kernel says kB and means KiB
    cached = info.get("Buffers", 0) + info.get("Cached", 0) + info.get("SReclaimable", 0)
    used = info["MemTotal"] - info["MemFree"] - cached
    return {"used": max(used, 0), "cached": cached, "total": info["MemTotal"]}


def net_counters() -> dict[str, tuple[int, int]]:
    """{interface: (rx_bytes, tx_bytes)} from /proc/net/dev, loopback left out."""
    result = {}
    for line in (PROC / "net" / "dev").read_text().splitlines()[2:]:
        name, _, rest = line.partition(":")
        name = name.strip()
        if name == "lo":
            continue
        parts = rest.split()
        result[name] = (int(parts[0]), int(parts[8]))
    return result


def _whole_disks() -> set[str]:
    # /sys/block lists whole devices (sda, nvme0n1, md0, dm-0), not partitions; loop and
    # ram devices are noise on a storage server.
    try:
        names = set(os.listdir("/sys/block"))
    except OSError:
        return set()
    return {n for n in names if not n.startswith(("loop", "ram", "zram"))}


def disk_counters() -> dict[str, tuple[int, int, int, int]]:
    """{device: (reads, read_bytes, writes, written_bytes)} of whole disks, /proc/diskstats."""
    disks = _whole_disks()
    result = {}
    for line in (PROC / "diskstats").read_text().splitlines():
        parts = line.split()
        if len(parts) < 10 or (disks and parts[2] not in disks):
            continue
        reads, read_sectors, writes, write_sectors = int(parts[3]), int(parts[5]), int(parts[7]), int(parts[9])
        result[parts[2]] = (reads, read_sectors * SECTOR, writes, write_sectors * SECTOR)
    return result


def disk_busy_ms() -> dict[str, int]:
    """{device: milliseconds spent doing I/O} of whole disks (io_ticks, field 13 of diskstats).

    Its rate over an interval is the device's busy fraction, what iostat calls %util.
    """
    disks = _whole_disks()
    result = {}
    for line in (PROC / "diskstats").read_text().splitlines():
        parts = line.split()
        if len(parts) < 13 or (disks and parts[2] not in disks):
            continue
        result[parts[2]] = int(parts[12])
    return result


def cpu_affinity(pid: int) -> set[int] | None:
    """The cores a process may run on (taskset, cpusets), None if it is gone."""
    try:
        return os.sched_getaffinity(pid)
    except OSError:
        return None


def _cpu_controller_mounts() -> list[tuple[str, str, bool]]:
    """(mount point, root inside the hierarchy, is cgroup v2) of each mount with the cpu controller."""
    found = []
    try:
        lines = (PROC / "self" / "mountinfo").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        if tail[0] == "cgroup" and "cpu" in tail[2].split(","):
            found.append((fields[4], fields[3], False))
        elif tail[0] == "cgroup2":
            found.append((fields[4], fields[3], True))
    return found


def _cgroup_of(pid: int) -> dict[bool, str]:
    """{is v2: path} of a process' cpu cgroup, from /proc/<pid>/cgroup."""
    paths: dict[bool, str] = {}
    try:
        lines = (PROC / str(pid) / "cgroup").read_text().splitlines()
    except OSError:
        return paths
    for line in lines:
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0" and not controllers:
            paths[True] = path
        elif "cpu" in controllers.split(","):
            paths[False] = path
    return paths


def _quota_at(directory: Path, v2: bool) -> float | None:
    try:
        if v2:
            quota, period = (directory / "cpu.max").read_text().split()[:2]
            return None if quota == "max" else int(quota) / int(period)
        quota = int((directory / "cpu.cfs_quota_us").read_text())
        period = int((directory / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota / period if quota > 0 and period > 0 else None


def _binding_quota(pid: int) -> tuple[str, float, Path, bool] | None:
    """(the process' cgroup path, cores, the directory whose quota binds, is v2) or None."""
    paths = _cgroup_of(pid)
    # A hybrid host lists a cgroup2 mount without the cpu controller: v1's cpu wins when present.
    for mount, root, v2 in sorted(_cpu_controller_mounts(), key=lambda m: m[2]):
        path = paths.get(v2)
        if path is None:
            continue
        # Outside a cgroup namespace the process' path starts with the mount's own root.
        if root != "/" and (path == root or path.startswith(root + "/")):
            path = path[len(root) :]
        directory = Path(mount, path.lstrip("/"))
        if not directory.is_dir():
            continue
        limits: list[tuple[float, Path]] = []
        current = directory
        while True:
            if (limit := _quota_at(current, v2)) is not None:
                limits.append((limit, current))
            if current == Path(mount) or current.parent == current:
                break
            current = current.parent
        if limits:
            cores, where = min(limits, key=lambda item: item[0])
            return path, cores, where, v2
        return None
    return None


def cpu_quota(pid: int) -> tuple[str, float] | None:
    """(cgroup, cores) when a CFS quota limits a process' CPU time, else None.

    A door in a container or a cgroup with cpu.cfs_quota_us (v1) or cpu.max (v2) saturates at
    quota/period of one core however many cores it may run on; the tightest quota of its
    cgroup and the cgroup's ancestors is the one that binds.
    """
    found = _binding_quota(pid)
    return (found[0], found[1]) if found else None


@dataclass(frozen=True)
class CpuThrottling:
    """A cgroup's CFS bandwidth counters (cpu.stat), cumulative since the cgroup was made."""

    periods: int  # enforcement periods in which the cgroup had work to run
    throttled: int  # of those, periods in which it used up its quota and was stopped
    throttled_seconds: float  # how long its runnable threads were kept off the CPU


def parse_cpu_stat(text: str) -> CpuThrottling | None:
    """cpu.stat of cgroup v2 (throttled_usec, microseconds) or v1 (throttled_time, nanoseconds);
    None when it has no bandwidth counters (v2 without a quota anywhere shows only usage)."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        key, _, number = line.partition(" ")
        if number.strip().lstrip("-").isdigit():
            values[key] = int(number)
    if "nr_periods" not in values or "nr_throttled" not in values:
        return None
    if "throttled_usec" in values:
        seconds = values["throttled_usec"] / 1e6
    elif "throttled_time" in values:
        seconds = values["throttled_time"] / 1e9
    else:
        return None
    return CpuThrottling(values["nr_periods"], values["nr_throttled"], seconds)


def cpu_throttling(pid: int) -> tuple[str, CpuThrottling] | None:
    """(the cgroup whose quota binds, its counters) for a process under a CPU quota, else None.
    The counters are read where the quota is set: that is the level the scheduler throttles."""
    found = _binding_quota(pid)
    if not found:
        return None
    _, _, where, _ = found
    try:
        counters = parse_cpu_stat((where / "cpu.stat").read_text())
    except OSError:
        return None
    return (str(where), counters) if counters else None


def per_cpu_times() -> dict[int, CpuTimes]:
    """The "cpuN" lines of /proc/stat: each core's busy and total seconds."""
    result = {}
    for line in (PROC / "stat").read_text().splitlines()[1:]:
        if not line.startswith("cpu"):
            break
        fields = line.split()
        result[int(fields[0][3:])] = _cpu_line(fields)
    return result


@dataclass(frozen=True)
class ProcStat:
    pid: int
    comm: str
    ppid: int
    cpu_seconds: float  # utime + stime
    start_ticks: int  # clock ticks after boot: with the pid, identifies one incarnation
    rss_bytes: int
    # cutime + cstime: the CPU of children it has waited for (a door's forked xrdcp --server
    # for a root:// TPC copy counts here once it has ended, and in its own stat while it runs).
    children_cpu_seconds: float = 0.0
    # R, S, D, Z, T (stopped by a signal: SIGSTOP, a debugger), t (stopped while traced), ...
    state: str = "R"


_PAGE = os.sysconf("SC_PAGE_SIZE")


def proc_stat(pid: int) -> ProcStat | None:
    """One process' /proc/<pid>/stat, or None when it is gone."""
    try:
        raw = (PROC / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # comm is in parentheses and may itself contain spaces or ')': split at the last ')'.
    head, _, tail = raw.rpartition(")")
    comm = head.partition("(")[2]
    fields = tail.split()
    # tail starts at field 3 (state): utime=14, stime=15, starttime=22, rss=24 (1-based).
    return ProcStat(
        pid=pid,
        comm=comm,
        ppid=int(fields[1]),
        cpu_seconds=(int(fields[11]) + int(fields[12])) / CLK_TCK,
        start_ticks=int(fields[19]),
        rss_bytes=int(fields[21]) * _PAGE,
        children_cpu_seconds=(int(fields[13]) + int(fields[14])) / CLK_TCK,
        state=fields[0],
    )


def parents() -> dict[int, int]:
    """Every process' parent: pid -> ppid, read once a tick to find a service's forked children."""
    found = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit() and (stat := proc_stat(int(entry.name))) is not None:
            found[stat.pid] = stat.ppid
    return found


def descendants(pid: int, parent_of: dict[int, int]) -> list[int]:
    """The live processes below pid (children, their children, ...)."""
    children: dict[int, list[int]] = {}
    for child, parent in parent_of.items():
        children.setdefault(parent, []).append(child)
    found, todo = [], list(children.get(pid, []))
    while todo:
        child = todo.pop()
        found.append(child)
        todo.extend(children.get(child, []))
    return found


def cpu_wait_seconds(pid: int) -> float | None:
    """Seconds the process' threads have waited on a run queue for a CPU (schedstat's run_delay,
    summed over /proc/<pid>/task/*): what says a daemon was starved of CPU, not merely beside a
    busy machine; None where the kernel keeps no schedstats."""
    total, found = 0, False
    try:
        tasks = list((PROC / str(pid) / "task").iterdir())
    except (FileNotFoundError, ProcessLookupError, PermissionError, NotADirectoryError):
        return None
    for task in tasks:
        try:
            fields = (task / "schedstat").read_text().split()
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if len(fields) >= 2:
            total += int(fields[1])
            found = True
    return total / 1e9 if found else None


def io_chars(pid: int) -> tuple[int, int] | None:
    """(rchar, wchar) of /proc/<pid>/io: every byte the process read or wrote through a system
    call, sockets and files alike (a door's data in and out); None where it may not be read."""
    try:
        text = (PROC / str(pid) / "io").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    values = dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)
    try:
        return int(values["rchar"]), int(values["wchar"])
    except (KeyError, ValueError):
        return None


def pids_by_name(name: str) -> list[int]:
    """Pids whose /proc/<pid>/comm is ``name`` (the kernel cuts comm to 15 characters)."""
    wanted = name[:15]
    pids = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "comm").read_text().rstrip("\n") == wanted:
                pids.append(int(entry.name))
        except OSError:
            continue
    return sorted(pids)


def pid_from_file(path: str) -> int | None:
    """The pid in a pid file, if the file exists and that process is alive."""
    try:
        pid = int(Path(path).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if (PROC / str(pid)).exists() else None


def cpu_count() -> int:
    return os.cpu_count() or 1

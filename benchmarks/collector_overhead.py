#!/usr/bin/env python3
"""CPU used by a host collector sampling every 5 s: target < 1 % of one core.

Two figures, on this machine, against the benchmark database (PostgreSQL + Redis, see harness):

* worker: a real collector (``manage.py collector --host …``) runs for --seconds; its CPU is
  utime+stime of every process of its group (Celery main process, pool child) from /proc,
  over the same wall time, after a warm-up that excludes Django's and Celery's start-up;
* tick: ``HostCollector.tick()`` called in this process --ticks times, back to back: the cost
  of one tick (read /proc, watches, logs, one bulk insert), and that cost per 5 s interval.

The host watches one config file, this process as a service (pid file) and one log file,
so every path of a tick is exercised.

    .venv/bin/python benchmarks/collector_overhead.py [--seconds 60] [--interval 5] [--ticks 200]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import harness

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def group_cpu(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            total += cpu_seconds(pid)
        except (OSError, IndexError):
            continue  # a pool child replaced between listing and reading
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--interval", type=int, default=5)
    parser.add_argument("--ticks", type=int, default=200)
    args = parser.parse_args()
    harness.setup()

    from collectors.models import Host
    from collectors.sampling import HostCollector
    from devsite.processes import ManagedProcess

    work = Path(tempfile.mkdtemp(prefix="collector-overhead-"))
    (work / "bench.pid").write_text(f"{os.getpid()}\n")
    (work / "door.cfg").write_text("all.export /data\n")
    (work / "door.log").write_text("")
    host = Host.objects.create(
        name=f"bench-overhead-{os.getpid()}",
        sample_interval=args.interval,
        watched_files=[str(work / "door.cfg")],
        watched_services=[{"name": "bench", "pidfile": str(work / "bench.pid")}],
        log_files=[{"path": str(work / "door.log")}],
    )
    try:
        argv = [sys.executable, "manage.py", "collector", "--host", host.name, "--loglevel", "warning"]
        worker = ManagedProcess("collector", argv, dict(os.environ), work, cwd=harness.ROOT).start()
        try:
            time.sleep(10)  # start-up (imports, broker connection) is not the steady state
            pids = worker.group_pids()
            cpu0, wall0 = group_cpu(pids), time.monotonic()
            time.sleep(args.seconds)
            pids = worker.group_pids()
            worker_pct = (group_cpu(pids) - cpu0) / (time.monotonic() - wall0) * 100
            samples = host.samples.count()
        finally:
            worker.stop()

        collector = HostCollector(host)
        collector.tick()
        cpu0 = cpu_seconds(os.getpid())
        for _ in range(args.ticks):
            collector.tick()
        per_tick = (cpu_seconds(os.getpid()) - cpu0) / args.ticks
    finally:
        host.delete()

    print(harness.machine())
    print(f"collector worker, {args.interval} s interval, {args.seconds:.0f} s: {worker_pct:.2f} % of one core "
          f"({len(pids)} processes, {samples} samples stored)")  # fmt: skip
    print(f"one tick in-process: {per_tick * 1000:.2f} ms CPU = {per_tick / args.interval * 100:.3f} % of one core "
          f"at {args.interval} s")  # fmt: skip
    print("target < 1 %:", "met" if worker_pct < 1 else "NOT met")


if __name__ == "__main__":
    main()

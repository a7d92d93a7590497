#!/usr/bin/env python3
"""The xrootd engine against gfal2 on two real XRootD doors: a concurrency sweep each, interleaved.

Two XRootD servers on loopback (door1 -> door2). --files random files of --size-mb MB are
written straight onto door1's disk once and their adler32 warmed (door1 answers later queries
from its cache, so neither engine pays for the first computation). Each run is a campaign with
the steps --steps, each step copying all --files files (source_file_count: the same sources for
every step) in --mode (pull: the doors' third-party copy; streamed: the bytes through this
process), adler32 checked on both sides. The runs alternate engines: gfal2, xrootd, xrootd,
gfal2, ... (--pairs pairs), driven in this process by the run lifecycle (RunDriver), as a
worker would.

Per step: the run's own throughput (summary["steps"]: the bytes of the step's successful copies
over its active window), the median copy, and the CPU seconds each door's xrootd daemon and this
process (the driver and its copy threads) spent in the step's window, read from /proc every
0.25 s. After each run, every destination on door2's disk is read back: its size and its
adler32 (zlib) must equal the Transfer row's; then door2's copies are deleted.

    .venv/bin/python -m devsite.launch --set test -- .venv/bin/python benchmarks/xrootd_engine.py \
        [--files 64] [--size-mb 32] [--steps 1,2,4,8] [--pairs 1] [--mode pull]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from bisect import bisect_left
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from urllib.parse import urlsplit

import harness

MB = 1000**2
SOURCE_BASE = "/data/bench"  # door1's endpoint; the sources lie below <this>/src/<size>/
DESTINATION_BASE = "/data/bench"  # door2's endpoint; each run writes below <this>/<engine>/run-<id>/
SAMPLE_SECONDS = 0.25
TICKS = os.sysconf("SC_CLK_TCK")


class BenchmarkFailed(SystemExit):
    def __init__(self, message: str) -> None:
        print(f"FAILED: {message}", file=sys.stderr)
        super().__init__(1)


def cpu_seconds(pid: int | None) -> float:
    """CPU of a process, its threads and its reaped children (/proc/<pid>/stat), 0 if it is gone:
    a door's third-party copies are `xrdcp --server` children it runs (ofs.tpc pgm)."""
    if not pid:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return sum(int(value) for value in fields[11:15]) / TICKS  # utime stime cutime cstime


@dataclass
class CpuSampler:
    """The CPU seconds of some processes, sampled in a thread with the wall clock."""

    pids: dict[str, int | None]
    times: list[float] = field(default_factory=list)
    samples: list[dict[str, float]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def _sample(self) -> None:
        self.times.append(time.time())
        self.samples.append({name: cpu_seconds(pid) for name, pid in self.pids.items()})

    def _loop(self) -> None:
        while not self.stop.wait(SAMPLE_SECONDS):
            self._sample()

    def __enter__(self) -> CpuSampler:
        self._sample()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
        self._sample()

    def between(self, start: float, end: float) -> dict[str, float]:
        """CPU seconds each process spent from `start` to `end` (epoch), to the nearest sample."""
        first = min(bisect_left(self.times, start), len(self.times) - 1)
        last = min(bisect_left(self.times, end), len(self.times) - 1)
        return {name: self.samples[last][name] - self.samples[first][name] for name in self.pids}


# -- sources and destinations ---------------------------------------------------------------------
def write_sources(door1, count: int, size: int) -> dict[str, str]:
    """The sources on door1's disk, each path with its adler32."""
    from campaigns.runs.planning import source_path

    paths = [f"{SOURCE_BASE}/{source_path('src', size, i)}" for i in range(count)]
    for path in paths:
        door1.write_local(path, os.urandom(size))
    address = f"127.0.0.1:{door1.port}"
    for path in paths:  # XRootD keeps a checksum it computed: warm them, for both engines alike
        out = subprocess.run(
            ["xrdfs", address, "query", "checksum", path], capture_output=True, text=True, check=False, timeout=120
        )
        if out.returncode != 0 or "adler32" not in out.stdout:
            raise BenchmarkFailed(f"checksum query of {path} on door1 failed: {out.stdout}{out.stderr}")
    return {path: adler32(door1.local_path(path)) for path in paths}


def adler32(path: Path) -> str:
    value = 1
    with path.open("rb") as handle:
        while chunk := handle.read(4 << 20):
            value = zlib.adler32(chunk, value)
    return f"{value:08x}"


def check_disk(run, door2, sources: dict[str, str]) -> tuple[int, int]:
    """Every transfer succeeded, and its file on door2's disk has the recorded size and the adler32
    of its source on door1's disk, and of the record where it holds one (gfal2 records only the
    checksum of data StorageOps wrote itself). Returns (files checked, of them with a checksum)."""
    from campaigns.models import Transfer

    checked = recorded = 0
    rows = Transfer.objects.filter(run=run).only(
        "state", "source", "destination", "size", "source_checksum", "destination_checksum", "error_message"
    )
    for t in rows:
        if t.state != "succeeded":
            raise BenchmarkFailed(f"run {run.pk}: transfer {t.pk} {t.state}: {t.error_message}")
        on_disk = door2.local_path(url_path(t.destination))
        size, found, source = on_disk.stat().st_size, adler32(on_disk), sources[url_path(t.source)]
        said = {t.source_checksum, t.destination_checksum} - {""}
        if size != t.size or found != source or said - {found}:
            raise BenchmarkFailed(
                f"run {run.pk}: {on_disk} has {size} bytes, adler32 {found} (its source {source}); the record "
                f"says {t.size} bytes, adler32 {t.source_checksum or '-'} -> {t.destination_checksum or '-'}"
            )
        checked += 1
        recorded += t.destination_checksum == found
    return checked, recorded


def url_path(url: str) -> str:
    return "/" + urlsplit(url).path.lstrip("/")


# -- runs -------------------------------------------------------------------------------------------
def make_campaign(engine: str, door1, door2, files: int, size: int, steps: list[int], mode: str):
    from campaigns.models import Backend, Campaign, Endpoint

    stamp = f"xrootd-engine-{engine}-{int(time.time())}-{os.getpid()}"
    backend, _ = Backend.objects.get_or_create(name="bench-xrootd-loopback", defaults={"access_layer": "xrootd"})
    src = Endpoint.objects.create(name=f"{stamp}-door1", backend=backend, url=door1.root_url_for(SOURCE_BASE + "/"))
    dst = Endpoint.objects.create(
        name=f"{stamp}-door2", backend=backend, url=door2.root_url_for(DESTINATION_BASE + "/")
    )
    campaign = Campaign(
        name=stamp, engine=engine, source_path="src", destination_path=engine, create_sources=False,
        file_count=files * len(steps), source_file_count=files, step_files=files, file_size=size,
        concurrency_steps=steps, tpc_mode=mode, checksum_mode="both", checksum_algorithm="adler32",
    )  # fmt: skip
    campaign.full_clean()
    campaign.save()
    campaign.sources.set([src])
    campaign.destinations.set([dst])
    return campaign


@dataclass
class StepFigures:
    concurrency: int
    achieved: float  # copies in flight on average over the step's window
    mbps: float
    copy_p50: float
    modes: str
    cpu: dict[str, float]


def run_once(
    campaign, door2, pids: dict[str, int | None], sources: dict[str, str]
) -> tuple[list[StepFigures], tuple[int, int], float]:
    from campaigns import runs
    from campaigns.choices import RunState
    from campaigns.models import Run, Transfer
    from campaigns.runs.lifecycle import RunDriver

    os.sync()  # no writeback of the last run's copies in this one's window
    run = runs.create_run(campaign, trigger="command")
    with CpuSampler(pids) as sampler:
        state = RunDriver(run.pk).drive()
    run = Run.objects.get(pk=run.pk)
    if state != RunState.SUCCEEDED:
        raise BenchmarkFailed(f"{campaign.engine} run {run.pk} {state}: {run.stop_reason} {run.error[-2000:]}")
    figures = []
    for step in run.summary["steps"]:
        start, end = (datetime.fromisoformat(step[key]).timestamp() for key in ("start", "end"))
        modes = set(Transfer.objects.filter(run=run, step=step["step"]).values_list("copy_mode", flat=True))
        figures.append(
            StepFigures(
                step["concurrency"],
                step.get("achieved_mean") or 0.0,
                (step["throughput_bps"] or 0) / MB,
                step["duration_p50"] or 0.0,
                "/".join(sorted(modes)),
                sampler.between(start, end),
            )
        )
    checked = check_disk(run, door2, sources)
    shutil.rmtree(door2.local_path(f"{DESTINATION_BASE}/{campaign.engine}"), ignore_errors=True)
    return figures, checked, (run.summary["total"]["throughput_bps"] or 0) / MB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=64, help="files per step (the same sources each step)")
    parser.add_argument("--size-mb", type=int, default=32, help="file size in MB (10^6 bytes)")
    parser.add_argument("--steps", default="1,2,4,8", help="the concurrency steps")
    parser.add_argument("--pairs", type=int, default=1, help="gfal2/xrootd pairs, the order alternating")
    parser.add_argument("--mode", default="pull", choices=("pull", "streamed", "auto"))
    args = parser.parse_args()
    steps = [int(s) for s in args.steps.split(",")]
    size = args.size_mb * MB
    harness.setup()
    from devsite.xrootd_server import XRootDServer

    print(f"machine: {harness.machine()}; load average {os.getloadavg()[0]:.1f} at the start")
    print(
        f"{args.files} files x {args.size_mb} MB per step, steps {steps}, mode {args.mode}, adler32 both sides, "
        f"door1 -> door2 on loopback, {args.pairs} pair(s) of runs",
        flush=True,
    )
    tmp = Path(tempfile.mkdtemp(prefix="xrootd-engine-"))
    doors: list[XRootDServer] = []
    try:
        for name in ("door1", "door2"):
            doors.append(XRootDServer(name, tmp / name, workdir=tmp / f"{name}-run").start())
        door1, door2 = doors
        sources = write_sources(door1, args.files, size)
        pids = {"door1": door1.pid, "door2": door2.pid, "driver": os.getpid()}
        order = [e for i in range(args.pairs) for e in (("gfal2", "xrootd") if i % 2 == 0 else ("xrootd", "gfal2"))]
        totals: dict[str, list[float]] = {"gfal2": [], "xrootd": []}
        per_step: dict[tuple[str, int], list[StepFigures]] = {}
        for number, engine in enumerate(order, 1):
            campaign = make_campaign(engine, door1, door2, args.files, size, steps, args.mode)
            figures, (checked, recorded), total = run_once(campaign, door2, pids, sources)
            totals[engine].append(total)
            print(
                f"run {number} {engine}: {total:,.1f} MB/s overall; {checked} files on door2's disk with the recorded "
                f"size and their source's adler32, {recorded} of them with it in the record"
            )
            for f in figures:
                per_step.setdefault((engine, f.concurrency), []).append(f)
                cpu = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in f.cpu.items())
                print(
                    f"  x{f.concurrency} (in flight {f.achieved:.1f}): {f.mbps:,.1f} MB/s, median copy "
                    f"{f.copy_p50:.2f} s ({f.modes}); CPU {cpu}"
                )
            sys.stdout.flush()
        print("\nmedian over runs, per step: engine, MB/s, in flight, median copy, CPU s of door1 / door2 / driver")
        for concurrency in steps:
            cells = []
            for engine in ("gfal2", "xrootd"):
                rows = per_step[(engine, concurrency)]
                cpu = {n: statistics.median(r.cpu[n] for r in rows) for n in pids}
                cells.append(
                    f"{engine} {statistics.median(r.mbps for r in rows):,.1f} MB/s "
                    f"{statistics.median(r.achieved for r in rows):.1f} "
                    f"{statistics.median(r.copy_p50 for r in rows):.2f} s "
                    f"{cpu['door1']:.1f}/{cpu['door2']:.1f}/{cpu['driver']:.1f}"
                )
            print(f"x{concurrency}: " + " | ".join(cells))
        print(f"load average {os.getloadavg()[0]:.1f} at the end")
    finally:
        for door in reversed(doors):
            door.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

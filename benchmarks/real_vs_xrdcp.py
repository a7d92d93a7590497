#!/usr/bin/env python3
"""Real root:// third-party copies: StorageOps (gfal2, a real worker) against plain xrdcp.

Two XRootD servers on loopback (door1 -> door2, TPC, adler32). N distinct random files of
--size-mb MB are written straight onto door1's disk, and the same files are copied to door2
twice in one run of this script, back to back:

* StorageOps: a gfal2 campaign (checksum both, adler32, concurrency C) started with
  start_run and driven by a real Celery worker process; its aggregate is
  run.summary["total"]["throughput_bps"] (bytes of successful copies over the active window);
* xrdcp: C `xrdcp --tpc only --cksum adler32 -f SRC DST` processes kept running at once,
  timed from the first start to the last end; aggregate = bytes / that window.

With --repeat the order alternates, so the ratio StorageOps/xrdcp is a same-run comparison
on a noisy machine. Target: ratio >= 0.9.

    .venv/bin/python benchmarks/real_vs_xrdcp.py [--files 32] [--size-mb 64] [--concurrency 8] [--repeat 1]
"""

from __future__ import annotations

import argparse
import os
import queue
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import harness

from devsite.processes import dying_with_parent

MB = 1000**2
SOURCE_BASE = "/data/bench"  # door1 endpoint; sources below <this>/src/<size>/src-NNNNNNN
STORAGEOPS_BASE = "/data/bench"  # door2 endpoint; StorageOps writes below <this>/storageops/run-<id>/
XRDCP_BASE = "/data/xrdcp"  # door2; xrdcp writes below <this>/rep-<n>/


@dataclass
class Result:
    method: str
    files_ok: int
    bytes: int
    window: float
    copy_p50: float
    client_cpu: float  # CPU seconds of the copying client: the worker's processes, or all xrdcp processes
    peak_rss: int = 0

    @property
    def mbps(self) -> float:
        return self.bytes / self.window / MB if self.window > 0 else 0.0


class BenchmarkFailed(SystemExit):
    def __init__(self, message: str) -> None:
        print(f"FAILED: {message}", file=sys.stderr)
        super().__init__(1)


# -- sources ----------------------------------------------------------------------------------------
def source_paths(count: int, size: int) -> list[str]:
    """Namespace paths exactly where campaigns.runs.planning.source_path puts source number i."""
    from campaigns.runs.planning import source_path

    return [f"{SOURCE_BASE}/{source_path('src', size, i)}" for i in range(count)]


def write_sources(door1, paths: list[str], size: int) -> None:
    for path in paths:
        door1.write_local(path, os.urandom(size))


def warm_source_checksums(door1, paths: list[str]) -> None:
    """Ask door1 for every source's adler32 once before anything is timed.

    XRootD remembers a checksum it has computed (a second query of a 256 MB file answers in
    10 ms instead of 240 ms); without this, the method measured first would pay for computing
    the source checksums and the second would not. Both then see the same, cached, source side.
    """
    address = f"127.0.0.1:{door1.port}"
    for path in paths:
        out = subprocess.run(["xrdfs", address, "query", "checksum", path], capture_output=True, text=True, check=False)
        if out.returncode != 0 or "adler32" not in out.stdout:
            raise BenchmarkFailed(f"checksum query of {path} on door1 failed: {out.stdout}{out.stderr}")


def clear_destinations(door2) -> None:
    for base in (STORAGEOPS_BASE + "/storageops", XRDCP_BASE):
        shutil.rmtree(door2.local_path(base), ignore_errors=True)


def check_sizes(door2, paths: list[str], size: int, method: str) -> None:
    """Independent of the tools' own verdict: every destination exists on door2 with the right size."""
    wrong = [p for p in paths if not door2.local_path(p).is_file() or door2.local_path(p).stat().st_size != size]
    if wrong:
        raise BenchmarkFailed(f"{method}: {len(wrong)} destination(s) missing or of the wrong size, e.g. {wrong[0]}")


# -- StorageOps -------------------------------------------------------------------------------------
def group_cpu_seconds(process) -> float:
    """User + system CPU of a worker's process group, its reaped children included."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in process.group_pids():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(value) for value in fields[11:15])  # utime stime cutime cstime
    return total / ticks


def start_worker(name: str, log_dir: Path, concurrency: int = 2):
    """harness.start_worker, but on this process's prefixed queues and waiting for *our* node.

    harness.start_worker listens on the plain control,transfers queues and is ready once any
    worker on the broker answers a ping; on a shared broker both can hand the run elsewhere.
    """
    from django.conf import settings

    from devsite.processes import ManagedProcess
    from storageops.celery import app

    queues = f"{settings.STORAGEOPS_CONTROL_QUEUE},{settings.STORAGEOPS_TRANSFERS_QUEUE}"
    node = f"{name}@{socket.gethostname()}"
    argv = [
        sys.executable, "-m", "celery", "-A", "storageops", "worker", "-Q", queues, "-c", str(concurrency),
        "-n", node, "--without-mingle", "--without-gossip", "-l", "warning",
    ]  # fmt: skip
    worker = ManagedProcess(name, argv, dict(os.environ), log_dir, cwd=harness.ROOT).start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if app.control.ping(destination=[node], timeout=1.0):
            return worker
        if worker.returncode is not None:
            worker.stop()
            raise RuntimeError(worker.log_text()[-3000:])
    worker.stop()
    raise TimeoutError(f"worker {node} did not answer a ping in 60 s")


def wait_for_pickup(run_id: int, timeout: float = 60.0) -> None:
    """Fail fast if no driver takes the run (instead of waiting out wait_for_run's timeout)."""
    from campaigns.models import Run

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = Run.objects.get(pk=run_id)
        if run.executor or not run.is_live:
            return
        time.sleep(0.2)
    raise TimeoutError(f"no worker picked up run {run_id} in {timeout:.0f} s")


def make_campaign(door1, door2, files: int, size: int, concurrency: int):
    from campaigns.models import Backend, Campaign, Endpoint

    stamp = f"real-vs-xrdcp-{int(time.time())}-{os.getpid()}"
    backend, _ = Backend.objects.get_or_create(name="bench-xrootd-loopback", defaults={"access_layer": "xrootd"})
    src = Endpoint.objects.create(name=f"{stamp}-door1", backend=backend, url=door1.root_url_for(SOURCE_BASE + "/"))
    dst = Endpoint.objects.create(name=f"{stamp}-door2", backend=backend, url=door2.root_url_for(STORAGEOPS_BASE + "/"))
    campaign = Campaign(
        name=stamp,
        engine="gfal2",
        source_path="src",
        destination_path="storageops",
        create_sources=False,
        file_count=files,
        file_size=size,
        checksum_mode="both",
        checksum_algorithm="adler32",
        concurrency_steps=[concurrency],
    )
    campaign.save()
    campaign.sources.set([src])
    campaign.destinations.set([dst])
    return campaign


def run_storageops(campaign, worker, door2) -> Result:
    from urllib.parse import urlsplit

    from campaigns import runs
    from campaigns.choices import RunState
    from campaigns.models import Run, Transfer

    cpu_before = group_cpu_seconds(worker)
    with harness.PeakRss(worker) as rss:
        run = runs.start_run(campaign, trigger="command")
        try:
            wait_for_pickup(run.pk)
            harness.wait_for_run(run.pk, timeout=3600)
        except BaseException:
            # Interrupted (or stuck): do not leave a live run for a later worker to resume.
            runs.request_cancel(run)
            raise
    cpu = group_cpu_seconds(worker) - cpu_before
    run = Run.objects.get(pk=run.pk)
    total = run.summary.get("total", {})
    planned = campaign.planned_files
    if run.state != RunState.SUCCEEDED or run.files_done != planned or total.get("files_ok") != planned:
        errors = list(
            Transfer.objects.filter(run=run).exclude(state="succeeded").values_list("state", "error_message")[:5]
        )
        raise BenchmarkFailed(
            f"StorageOps run {run.pk} {run.state}: {run.files_done} of {planned} succeeded, "
            f"{run.files_failed} failed, {run.files_skipped} skipped; {run.error[-2000:]} {errors}"
        )
    destinations = ["/" + urlsplit(url).path.lstrip("/") for url in run.transfers.values_list("destination", flat=True)]
    check_sizes(door2, destinations, campaign.file_size, "StorageOps")
    return Result(
        "StorageOps", total["files_ok"], total["bytes"], total["window_seconds"], total["duration_p50"], cpu, rss.peak
    )


# -- xrdcp ------------------------------------------------------------------------------------------
class XrdcpPool:
    """`concurrency` threads, each running one xrdcp process at a time until the jobs run out.

    Every process is recorded by its Popen, so an interrupt kills exactly the ones we started.
    """

    def __init__(self, concurrency: int) -> None:
        self.concurrency = concurrency
        self.jobs: queue.SimpleQueue[tuple[str, str]] = queue.SimpleQueue()
        self.lock = threading.Lock()
        self.running: set[subprocess.Popen] = set()
        self.failures: list[str] = []
        self.first_start: float | None = None
        self.last_end: float | None = None
        self.durations: list[float] = []
        self.stopping = threading.Event()

    def _thread(self) -> None:
        while not self.stopping.is_set():
            try:
                src, dst = self.jobs.get_nowait()
            except queue.Empty:
                return
            argv = ["xrdcp", "--tpc", "only", "--cksum", "adler32", "-f", src, dst]
            with self.lock:
                if self.stopping.is_set():
                    return
                start = time.monotonic()
                # Dies with this thread's process, even a SIGKILLed one (the thread outlives it).
                proc = subprocess.Popen(
                    dying_with_parent(argv),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                )
                self.running.add(proc)
                if self.first_start is None:
                    self.first_start = start
            output, _ = proc.communicate()
            end = time.monotonic()
            with self.lock:
                self.running.discard(proc)
                self.last_end = end if self.last_end is None else max(self.last_end, end)
                self.durations.append(end - start)
                if proc.returncode != 0:
                    text = output.decode(errors="replace").strip()
                    self.failures.append(f"xrdcp {src} {dst} exited {proc.returncode}: {text}")

    def run(self, pairs: list[tuple[str, str]]) -> float:
        """Copy every pair; returns the window from the first start to the last end."""
        for pair in pairs:
            self.jobs.put(pair)
        threads = [threading.Thread(target=self._thread, daemon=True) for _ in range(self.concurrency)]
        try:
            for thread in threads:
                thread.start()
            for thread in threads:
                while thread.is_alive():
                    thread.join(0.2)  # a timed join keeps Ctrl-C deliverable
        finally:
            self.stopping.set()
            with self.lock:
                procs = list(self.running)
            for proc in procs:  # only on an interrupt: normally none is left
                proc.kill()
            for thread in threads:
                thread.join(10)
        if self.first_start is None or self.last_end is None:
            return 0.0
        return self.last_end - self.first_start


def run_xrdcp(door1, door2, sources: list[str], size: int, concurrency: int, repeat: int) -> Result:
    base = f"{XRDCP_BASE}/rep-{repeat}"
    destinations = [f"{base}/f{i:07d}" for i in range(len(sources))]
    # The destination directory exists before the clock starts (gfal2 makes it with create_parent).
    mkdir = subprocess.run(
        ["xrdfs", f"127.0.0.1:{door2.port}", "mkdir", "-p", base], capture_output=True, text=True, check=False
    )
    if mkdir.returncode != 0:
        raise BenchmarkFailed(f"xrdfs mkdir {base} on door2 failed: {mkdir.stdout}{mkdir.stderr}")
    pairs = [(door1.root_url_for(s), door2.root_url_for(d)) for s, d in zip(sources, destinations, strict=True)]
    pool = XrdcpPool(concurrency)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    window = pool.run(pairs)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    if pool.failures:
        raise BenchmarkFailed(f"{len(pool.failures)} xrdcp copies failed; first: {pool.failures[0]}")
    check_sizes(door2, destinations, size, "xrdcp")
    return Result("xrdcp", len(pairs), len(pairs) * size, window, statistics.median(pool.durations), cpu)


# -- main -------------------------------------------------------------------------------------------
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=32)
    parser.add_argument("--size-mb", type=int, default=64, help="file size in MB (10^6 bytes)")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=1, help="measure both this many times, alternating the order")
    args = parser.parse_args()
    if min(args.files, args.size_mb, args.concurrency, args.repeat) < 1:
        parser.error("every argument must be at least 1")
    size = args.size_mb * MB
    # Our own queues: the Redis broker is shared with other sessions' workers (tests, other
    # benchmarks), and one of them taking this run's drive_run task from the plain "transfers"
    # queue would find no such run in its database and drop it. Set before Django reads settings.
    os.environ.setdefault("STORAGEOPS_QUEUE_PREFIX", f"bench-xrdcp-{os.getpid()}-")
    # A plain `kill` stops the worker and the doors at once, stuck copy or not, then unwinds
    # like Ctrl-C, so the finally below still cleans up (harness.stop_children_on_signals).
    harness.setup()
    from devsite.xrootd_server import XRootDServer

    print(f"machine: {harness.machine()}")
    print(
        f"{args.files} files x {args.size_mb} MB, root:// TPC door1 -> door2 on loopback, concurrency "
        f"{args.concurrency}, adler32 checked on both sides, {args.repeat} repeat(s)",
        flush=True,
    )
    tmp = Path(tempfile.mkdtemp(prefix="real-vs-xrdcp-"))
    servers: list[XRootDServer] = []
    worker = None
    try:
        for name in ("door1", "door2"):
            server = XRootDServer(name, tmp / name, workdir=tmp / f"{name}-run")
            servers.append(server)
            server.start()
        door1, door2 = servers
        sources = source_paths(args.files, size)
        write_sources(door1, sources, size)
        warm_source_checksums(door1, sources)
        (tmp / "logs").mkdir()
        worker = start_worker(f"bench-xrdcp-{os.getpid()}", tmp / "logs")
        campaign = make_campaign(door1, door2, args.files, size, args.concurrency)

        ratios: list[float] = []
        totals = {"StorageOps": [0, 0.0], "xrdcp": [0, 0.0]}
        storageops_ok = 0
        peak_rss = 0
        for repeat in range(args.repeat):
            order = ("StorageOps", "xrdcp") if repeat % 2 == 0 else ("xrdcp", "StorageOps")
            results: dict[str, Result] = {}
            for method in order:
                # No dirty pages left from writing the sources or the previous method's copies:
                # their writeback would otherwise slow whichever method runs next.
                os.sync()
                if method == "StorageOps":
                    result = run_storageops(campaign, worker, door2)
                    peak_rss = max(peak_rss, result.peak_rss)
                    storageops_ok += result.files_ok
                else:
                    result = run_xrdcp(door1, door2, sources, size, args.concurrency, repeat)
                results[method] = result
                totals[method][0] += result.bytes
                totals[method][1] += result.window
                clear_destinations(door2)  # keep door2's disk bounded
            ours, theirs = results["StorageOps"], results["xrdcp"]
            ratio = ours.mbps / theirs.mbps if theirs.mbps else 0.0
            ratios.append(ratio)
            print(
                f"repeat {repeat + 1} ({' then '.join(order)}): StorageOps {ours.mbps:,.1f} MB/s "
                f"({ours.files_ok} of {args.files} ok in {ours.window:.2f} s, median copy {ours.copy_p50:.2f} s), "
                f"xrdcp {theirs.mbps:,.1f} MB/s ({theirs.files_ok} ok in {theirs.window:.2f} s, median copy "
                f"{theirs.copy_p50:.2f} s) -> ratio {ratio:.3f}; client CPU: StorageOps worker "
                f"{ours.client_cpu:.1f} s, xrdcp processes {theirs.client_cpu:.1f} s",
                flush=True,
            )
        ours_mbps = totals["StorageOps"][0] / totals["StorageOps"][1] / MB
        theirs_mbps = totals["xrdcp"][0] / totals["xrdcp"][1] / MB
        overall = ours_mbps / theirs_mbps
        verdict = "met" if overall >= 0.9 else "NOT met"
        median = f", median of per-repeat ratios {statistics.median(ratios):.3f}" if len(ratios) > 1 else ""
        print(
            f"overall: StorageOps {ours_mbps:,.1f} MB/s, xrdcp {theirs_mbps:,.1f} MB/s -> ratio {overall:.3f}"
            f"{median} (target >= 0.9: {verdict}); StorageOps succeeded {storageops_ok} of "
            f"{args.files * args.repeat} transfers; worker peak RSS {peak_rss / 2**20:,.0f} MiB"
        )
    finally:
        if worker is not None:
            worker.stop()
        for server in reversed(servers):
            server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

"""The bottleneck experiment: a real XRootD door confined to one core (taskset -c 0) under a
concurrency sweep of adler32 checksum requests, sampled by a real collector worker; the
verdict must name that door's CPU (and the curve must level off when nothing else ran on that
core). The same sweep on a door free to use both cores, stopped
at concurrency 2 (below its knee on this 2-core machine), must read "still rising" -- when the
second core is free for it: when a sweep levels off while other sessions kept the machine's
CPU saturated from concurrency 1, the test retries it, and at worst reports a skip; a sweep
that levels off on a machine with a free core fails.

Each request asks for the adler32 of a new sparse file on tmpfs: the door reads zeros from
memory and spends its time computing the checksum, so it is CPU-bound by construction (no
disk, no network), the way Lancaster's gateways were when they checksummed new files.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from django.db.models import Avg

from campaigns import runs
from campaigns.choices import CampaignKind
from campaigns.models import Run
from campaigns.results import verdicts
from campaigns.runs.lifecycle import RunDriver
from collectors.models import Host, MetricSample
from devsite.xrootd_server import XRootDServer
from tests.support.factories import campaign, endpoint
from tests.support.processes import PYTHON, ROOT, ManagedProcess
from tests.support.sparse import has_tmpfs, sparse_sources, tmpfs_dir
from tests.support.workers import child_env

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

SIZE = 64 * 1024 * 1024
FILES = 600  # more than any step can ask for: sparse, they cost nothing
STEP_SECONDS = 6
FREE_ATTEMPTS = 3


def start_collector(host: Host, log_dir: Path) -> ManagedProcess:
    argv = [PYTHON, "manage.py", "collector", "--host", host.name, "--loglevel", "info"]
    return ManagedProcess(f"collector-{host.name}", argv, child_env(), log_dir, cwd=ROOT).start()


def wait_for_samples(host: Host, process: ManagedProcess, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    query = MetricSample.objects.filter(host=host, metric="proc.cpu_percent", label="xrootd")
    while not query.exists():
        assert time.monotonic() < deadline and process.returncode is None, process.log_text()[-3000:]
        time.sleep(0.5)


def sweep(name: str, server: XRootDServer, host: Host, steps: list[int]) -> Run:
    sparse_sources(server, name, FILES, SIZE)
    src = endpoint(name, server.root_url_for("/data/"))
    src.hosts.set([host])
    obj = campaign(
        name, [src], [], kind=CampaignKind.CHECKSUM_LOAD, file_count=FILES, file_size=SIZE, source_path=name,
        concurrency_steps=steps, step_seconds=STEP_SECONDS, timeout=60, target_rate_bps=10_000_000_000,
    )  # fmt: skip
    obj.full_clean()
    run = runs.create_run(obj, trigger="command")
    RunDriver(run.pk).drive()
    run.refresh_from_db()
    return run


def door_had_its_core(run: Run, host: Host) -> bool:
    """The confined-door case assumes the door has core 0 to itself: its own CPU at 90 % or more
    of that core in every step. Other sessions running on core 0 make it false."""
    for step in run.steps.all():
        own = MetricSample.objects.filter(
            host=host, metric="proc.cpu_percent", label="xrootd", time__gt=step.started_at, time__lte=step.ended_at
        ).aggregate(mean=Avg("value"))["mean"]
        if own is None or own < 90:
            return False
    return True


def second_core_was_free(run: Run) -> bool:
    """The free-door case assumes the door can take the second core at concurrency 2: true
    when the whole machine was below saturation while the door ran one request at a time.
    Other sessions sharing this 2-core machine can make it false (their load, not the door)."""
    first = run.summary["verdict"]["saturation"][0]["readings"]
    return any(r["resource"] == "cpu" and r["value"] < verdicts.SATURATED for r in first)


def report(run: Run) -> str:
    lines = [run.summary["verdict"]["headline"]]
    for step in run.summary["verdict"]["saturation"]:
        figures = next(s for s in run.summary["steps"] if s["step"] == step["step"])
        top = ", ".join(f"{r['title']} {r['value']:.0%}" for r in step["readings"][:3])
        lines.append(f"  ×{step['concurrency']}: {figures['throughput_bps'] / 1e6:.0f} MB/s; {top}")
    return "\n".join(lines)


@pytest.fixture
def scratch():
    if not has_tmpfs():
        pytest.skip("needs a tmpfs at /dev/shm for the sparse files")
    with tmpfs_dir("storageops-bottleneck") as base:
        yield base


def test_a_door_confined_to_one_core_is_named_and_a_free_one_is_still_rising(scratch, log_dir):
    confined = XRootDServer("confined", scratch / "c", workdir=scratch / "cr", cpu_list="0")
    free = XRootDServer("free", scratch / "f", workdir=scratch / "fr")
    servers, collectors = [confined.start(), free.start()], []
    try:
        hosts = [
            Host.objects.create(
                name=name, sample_interval=1, watched_services=[{"name": "xrootd", "pidfile": str(s.xrootd_pidfile)}]
            )
            for name, s in (("confined-door", confined), ("free-door", free))
        ]
        collectors = [start_collector(host, log_dir) for host in hosts]
        for host, process in zip(hosts, collectors, strict=True):
            wait_for_samples(host, process)
        pinned = sweep("pinned", confined, hosts[0], [1, 2, 4, 8])
        for attempt in range(FREE_ATTEMPTS):
            unpinned = sweep(f"unpinned{attempt}", free, hosts[1], [1, 2])
            rising = unpinned.summary["verdict"]["status"] == "still_rising"
            if rising or second_core_was_free(unpinned):
                break  # shown, or levelled on a free machine: the assertions below judge it
            print(f"free door, attempt {attempt + 1}: the machine was busy\n{report(unpinned)}")
    finally:
        for process in collectors:
            process.stop()
        for server in servers:
            server.stop()
    print(f"confined:\n{report(pinned)}\nfree:\n{report(unpinned)}")

    verdict = pinned.summary["verdict"]
    if door_had_its_core(pinned, hosts[0]):
        assert verdict["status"] == "levelled", report(pinned)
    else:
        # Other sessions shared core 0: more request threads won the door a larger share of
        # it, so the curve may still rise; the door's CPU is saturated all the same.
        print("confined door: other work shared its core; the curve's shape is not judged")
    b = verdict["bottleneck"]
    assert b and (b["door"], b["resource"], b["label"]) == ("confined-door", "daemon_cpu", "xrootd"), report(pinned)
    assert "CPU of xrootd on confined-door" in verdict["headline"]
    assert "1 core(s)" in b["detail"]
    assert verdict["capacity"]["doors_needed"] >= 1

    verdict = unpinned.summary["verdict"]
    if verdict["status"] != "still_rising" and not second_core_was_free(unpinned):
        # Then the host's CPU was the limit from concurrency 1, and the verdict must say so;
        # but the free-door case was not shown, which a skip reports rather than hides.
        assert verdict["bottleneck"]["resource"] in ("cpu", "daemon_cpu"), report(unpinned)
        assert verdict["bottleneck"]["door"] == "free-door", report(unpinned)
        pytest.skip(f"other work kept this 2-core machine busy in {FREE_ATTEMPTS} free-door sweeps")
    assert verdict["status"] == "still_rising", report(unpinned)
    assert verdict["headline"].startswith("Still rising at the last step (concurrency 2")

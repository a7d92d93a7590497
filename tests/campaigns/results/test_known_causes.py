"""The known-cause corpus (issue 43): a verdict is right only if it names the cause put there.

Each scenario is a concurrency sweep of real root:// copies streamed from one XRootD door (door1)
to another (door2), both sampled by real collector processes whose hosts' own interval is 5 s
(they sample every second while the run is live: collectors.live). One cause is put in each:

- free: nothing held back; the verdict must say the curve is still rising, or name this machine's
  CPU (two cores shared by the client, both doors and the database);
- door2's CPU: its xrootd held to a tenth of a core by a cgroup CPU quota: "CPU quota of xrootd on
  door2" at or before the knee;
- door2's data rate: XRootD's own throttle (`throttle.throttle data`): "data-rate limit of xrootd
  on door2", not its CPU;
- a slow source: door1 behind the throttle: the limit is elsewhere, "on the source side";
- door2's checksum limit: `xrootd.chksum max 1` under a checksum load: overload errors from the
  step where the requests begin to time out.

The table of a real run of each is in docs/verdicts.md; print it with
`pytest -s tests/campaigns/results/test_known_causes.py`.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from campaigns import runs
from campaigns.choices import CampaignKind
from campaigns.models import Run
from campaigns.results import verdicts
from campaigns.runs.lifecycle import RunDriver
from collectors.models import Host
from devsite.xrootd_server import XRootDServer, throttle_config
from tests.campaigns.results.test_bottleneck_experiment import start_collector, wait_for_samples
from tests.support.cgroups import cpu_cgroup
from tests.support.factories import campaign, endpoint
from tests.support.processes import ManagedProcess
from tests.support.sparse import has_tmpfs, sparse_sources, tmpfs_dir

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

SIZE = 4 * 1024 * 1024
FILES = 3000  # more than a sweep asks for: sparse on the source, they cost nothing there
STEPS = [1, 2, 4, 8]
STEP_SECONDS = 8
SHARES = 16384  # far above every other process': a door gets the CPU the scenario gives it
RATE = 12_000_000  # bytes/s of a throttled door: under what a free door moves at concurrency 1


@dataclass
class Scenario:
    name: str
    door1: list[str] = field(default_factory=list)  # extra config lines
    door2: list[str] = field(default_factory=list)
    door2_quota: float | None = None  # cores
    chksum_max: int | None = None
    kind: str = CampaignKind.TRANSFER
    size: int = SIZE


SCENARIOS = [
    Scenario("free"),
    Scenario("door2-cpu", door2_quota=0.1),
    Scenario("door2-rate", door2=throttle_config(RATE)),
    Scenario("slow-source", door1=throttle_config(RATE)),
    # Checksums of 64 MiB take long enough that requests overlap; beyond the limit of one xrootd
    # tells the client to wait and ask again (kXR_wait), and the campaign's timeout ends some.
    Scenario("door2-checksums", chksum_max=1, kind=CampaignKind.CHECKSUM_LOAD, size=64 * 1024 * 1024),
]


def right(scenario: str, verdict: dict) -> bool:
    """Whether the verdict names the cause the scenario put there."""
    status, cause = verdicts.kind(verdict)
    b, f, o = verdict.get("bottleneck") or {}, verdict.get("far_side") or {}, verdict.get("overload_errors")
    knee = (verdict.get("knee") or {}).get("step")
    if scenario == "free":
        # Nothing was put there: the curve still rises, or this machine's CPU (starving a door,
        # either side: both doors are this machine) or the client that streams every byte (not
        # a host StorageOps samples) levels it.
        machine = {"cpu", "cores"}
        return (
            status == "still_rising" or cause == "elsewhere"
            or (cause == "bottleneck" and b["resource"] in machine)
            or (cause == "far_side" and f["resource"] in machine)
        )  # fmt: skip
    if scenario == "door2-cpu":
        return (
            cause == "bottleneck" and (b["door"], b["resource"]) == ("door2", "daemon_cpu")
            and b["title"].startswith("CPU quota of xrootd") and b["step"] <= knee
        )  # fmt: skip
    if scenario == "door2-rate":
        return cause == "bottleneck" and (b["door"], b["resource"]) == ("door2", "rate")
    if scenario == "slow-source":
        return cause == "far_side" and (f["door"], f["resource"], f["side"]) == ("door1", "rate", "source")
    if scenario == "door2-checksums":
        return o is not None and o["step"] == first_timeouts(verdict)
    raise AssertionError(scenario)


def first_timeouts(verdict: dict) -> int | None:
    """The first step whose requests timed out (from the steps' own error counts)."""
    rows = [s for s in verdict.get("saturation") or [] if (s.get("overload_error_rate") or 0) > 0]
    return rows[0]["step"] if rows else None


def saturation(run: Run) -> str:
    """Each step's busiest readings, for the log of a wrong verdict."""
    lines = []
    for step in run.summary["verdict"]["saturation"]:
        top = "; ".join(f"{r['title']} {r['value']:.0%} ({r['detail']})" for r in step["readings"][:4])
        lines.append(f"  ×{step['concurrency']}: {top or step.get('not_enough_samples') or 'no samples'}")
    return "\n".join(lines)


def curve(run: Run) -> str:
    return ", ".join(
        f"×{s['concurrency']} {s['throughput_bps'] / 1e6:.1f}"
        + (f" ({s.get('files_failed', 0)} of {s['files_ok'] + s['files_failed']} failed: {s.get('errors')})"
           if s.get("files_failed") else "")
        for s in run.summary["steps"]
    )  # fmt: skip


def drive(scenario: Scenario, scratch: Path, log_dir: Path) -> Run:
    base = scratch / scenario.name
    door1 = XRootDServer("door1", base / "d1", workdir=base / "w1", extra_config=scenario.door1)
    door2 = XRootDServer(
        "door2", base / "d2", workdir=base / "w2", extra_config=scenario.door2, chksum_max=scenario.chksum_max
    )
    collectors: list[ManagedProcess] = []
    with (
        cpu_cgroup(f"{scenario.name}-1", shares=SHARES) as group1,
        cpu_cgroup(f"{scenario.name}-2", quota_cores=scenario.door2_quota, shares=SHARES) as group2,
    ):
        try:
            for server, group in ((door1, group1), (door2, group2)):
                server.start()
                group.add(server.pid)
            hosts = []
            for name, server in (("door1", door1), ("door2", door2)):
                host, _ = Host.objects.update_or_create(
                    name=name,
                    defaults={"sample_interval": 5, "watched_files": [str(server.config_path)],
                              "watched_services": [{"name": "xrootd", "pidfile": str(server.xrootd_pidfile)}]},
                )  # fmt: skip
                hosts.append(host)
            collectors = [start_collector(host, log_dir) for host in hosts]
            for host, process in zip(hosts, collectors, strict=True):
                wait_for_samples(host, process)
            if scenario.kind == CampaignKind.CHECKSUM_LOAD:
                sparse_sources(door2, scenario.name, FILES, scenario.size)
                src = endpoint(f"{scenario.name}-2", door2.root_url_for("/data/"))
                src.hosts.set([hosts[1]])
                obj = campaign(
                    scenario.name, [src], [], kind=scenario.kind, file_count=FILES, file_size=scenario.size,
                    source_path=scenario.name, concurrency_steps=STEPS, step_seconds=STEP_SECONDS, timeout=5,
                )  # fmt: skip
            else:
                sparse_sources(door1, scenario.name, FILES, SIZE)
                src = endpoint(f"{scenario.name}-1", door1.root_url_for("/data/"))
                dst = endpoint(f"{scenario.name}-2", door2.root_url_for("/data/"))
                src.hosts.set([hosts[0]])
                dst.hosts.set([hosts[1]])
                obj = campaign(
                    scenario.name, [src], [dst], file_count=FILES, file_size=SIZE, source_path=scenario.name,
                    source_file_count=FILES, tpc_mode="streamed", concurrency_steps=STEPS,
                    step_seconds=STEP_SECONDS, timeout=60, checksum_mode="none",
                )  # fmt: skip
            obj.full_clean()
            run = runs.create_run(obj, trigger="command")
            RunDriver(run.pk).drive()
            run.refresh_from_db()
            return run
        finally:
            ManagedProcess.stop_all(collectors)
            for server in (door1, door2):
                server.stop()
            shutil.rmtree(base, ignore_errors=True)
            Host.objects.filter(name__in=("door1", "door2")).update(watched_services=[], watched_files=[])


@pytest.fixture
def scratch():
    if not has_tmpfs():
        pytest.skip("needs a tmpfs at /dev/shm")
    with tmpfs_dir("storageops-causes") as base:
        yield base


# Those whose cause is this machine's CPU (a free sweep streams 300 MB/s; a quota; checksums of
# 64 MiB against a 5 s timeout) run alone (marker serial); a throttle's rate holds beside the suite.
CPU_BOUND = {"free", "door2-cpu", "door2-checksums"}


@pytest.mark.parametrize(
    "scenario",
    [pytest.param(s, id=s.name, marks=[pytest.mark.serial] if s.name in CPU_BOUND else []) for s in SCENARIOS],
)
def test_the_verdict_names_the_cause_put_there(scenario, scratch, log_dir):
    # The doors run at high CPU shares (each gets the CPU its scenario gives it); the client side,
    # this process, does not: a free sweep streams 300 MB/s through it, and at high shares it
    # starved the suite's other real-door tests beside it (a quiet night read 4 MB/s, not 16).
    run = drive(scenario, scratch, log_dir)
    verdict = run.summary["verdict"]
    ok = right(scenario.name, verdict)
    print(f"\n| {scenario.name} | {curve(run)} | {verdict['headline']} | {'right' if ok else 'WRONG'} |")
    assert ok, f"{verdict['headline']}\n{saturation(run)}"

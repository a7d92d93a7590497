"""A month of faults in an hour (issue 48): campaigns kept running while real processes are broken.

    make soak SOAK_MINUTES=60 SOAK_SEED=48
    .venv/bin/python -m benchmarks.soak --minutes 60 --seed 48 [--plan]

The soak starts a site of its own under var/soak/ (through devsite: its PostgreSQL and Redis,
two real XRootD doors, the worker, beat, a collector per door, two pool clients) and keeps three
campaigns running between the doors: one on gfal2's copy threads, one shared by the client
pool, and one through FTS. No FTS server runs here: its double (tests/support/fts_double.py,
FTS 3.14's REST answers, its scheduler's and optimizer's timing, the kill seconds after a
cancel) runs in the soak's own process, as a site's FTS runs beside it, and copies for real with
gfal2 between the doors; the faults hit the site, not FTS. Meanwhile it injects the faults of
a plan (``fault_plan``, a pure function of the seed and the duration: ``--plan`` prints it and
starts nothing), each on a process the soak started, by its pid: a door SIGKILLed (the
supervisor restarts it), SIGSTOPped then continued (a hung door), its filesystem filled
(door2's data folder is a small tmpfs: ENOSPC is real) then freed; the worker SIGKILLed, and
killed by the kernel's OOM killer under a cgroup memory limit; Redis SIGKILLed and started
empty; PostgreSQL stopped (immediate shutdown) and started again; a collector stopped (SIGSTOP:
its host gone silent) for minutes; a pool client SIGKILLed; and two of these at once.

Every run that ends is checked against the doors' disks (each succeeded copy's file there,
with its planned size and its recorded adler32), then its files are removed so that the small
tmpfs does not fill by itself. At the end the report (printed, and written as JSON and text
under var/soak/) gives the faults by kind, the runs by state, the files planned, recorded, on
disk, lost, recorded twice and left live, the time from each fault's end to the next copy that
succeeded, and what the event log says about each fault. docs/soak.md has the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import secrets
import signal
import statistics
import sys
import threading
import time
import zlib
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent

DOORS = ("door1", "door2")
#: door2 holds the copies' destinations and lives on a tmpfs this small: a fill is quick.
FULL_DOOR = "door2"
TMPFS_SIZE = "48m"
CLIENTS = ("demo-client1", "demo-client2")

KINDS = (
    "door_kill",
    "door_hang",
    "door_full",
    "worker_kill",
    "worker_oom",
    "redis_kill",
    "postgres_stop",
    "collector_stop",
    "client_kill",
)
#: How long each kind lasts in a 60-minute soak (seconds, uniform); shorter soaks scale them down
#: (never below the floor). Kills last 0: what follows them is the restart.
HOLDS = {
    "door_kill": (0, 0, 0),
    "door_hang": (30, 300, 10),
    "door_full": (30, 120, 10),
    "worker_kill": (0, 0, 0),
    "worker_oom": (30, 90, 15),
    "redis_kill": (1, 10, 1),
    "postgres_stop": (5, 45, 3),
    "collector_stop": (120, 300, 30),
    "client_kill": (0, 0, 0),
}
#: A bit over two faults a minute on average: at least 120 in an hour.
MEAN_GAP = 27.0
#: Bytes a worker under a memory limit may still grow by before the OOM killer takes it.
OOM_MARGIN = 1 << 20
#: A memory limit that has killed nothing is held up to this many times its planned length.
OOM_WAIT = 2.0
#: A target stays untouched this long after its fault ends (a restart must come first).
TARGET_REST = 5.0
#: A door's state (hung, full) or a server's outage is seen while it lasts, by the collector's
#: next sample or the watcher's next probe: an event begun later than this after the fault
#: ended is another's (the next fault on a target may start TARGET_REST after).
SEEN = 1.0
#: Seconds between a collector heard again and the end of its silence as the soak saw it: an
#: alert of the silence is sent before then.
TOLD_LAG = 10.0
#: The collectors' episode events that may have begun with an earlier fault and carry a later one.
CARRIED = {"door_full": "disk_full", "door_hang": "service_hung"}
#: A fault whose target's process is down waits for its restart this long at most.
READY_WAIT = 60.0


@dataclass(frozen=True)
class Fault:
    at: float  # seconds after the soak's start
    kind: str
    target: str
    hold: float  # seconds it lasts; 0 for a kill
    pair: int = 0  # two faults started together share a number > 0


def _targets(kind: str) -> tuple[str, ...]:
    if kind in ("door_kill", "door_hang"):
        return DOORS
    if kind == "door_full":
        return (FULL_DOOR,)
    if kind in ("worker_kill", "worker_oom"):
        return ("worker",)
    if kind == "collector_stop":
        return tuple(f"collector-{door}" for door in DOORS)
    if kind == "client_kill":
        return tuple(f"client-{client}" for client in CLIENTS)
    return (kind.split("_")[0],)  # redis, postgres


def fault_plan(seed: int, minutes: float) -> list[Fault]:
    """The faults of a soak, a pure function of its seed and length.

    Starts come about every MEAN_GAP seconds after a warm-up, in decks that hold every kind once
    and one pair of kinds started together, shuffled; a fault waits for its target to be free
    (a door is not hung while it is dead), and none lasts into the last tenth of the soak, when
    the runs are left to settle."""
    rng = random.Random(f"soak:{seed}:{minutes}")
    total = minutes * 60.0
    scale = min(1.0, minutes / 60.0)
    start, end = min(90.0, 0.1 * total), total - max(60.0, 0.1 * total)
    busy: dict[str, float] = defaultdict(float)
    plan: list[Fault] = []
    pairs = 0
    t = start
    while True:
        deck = [*KINDS, "pair"]
        rng.shuffle(deck)
        for entry in deck:
            t += rng.uniform(0.5, 1.5) * MEAN_GAP
            if t >= end:
                return sorted(plan, key=lambda f: (f.at, f.kind, f.target))
            kinds = rng.sample(KINDS, 2) if entry == "pair" else [entry]
            chosen = []
            for kind in kinds:
                low, high, floor = HOLDS[kind]
                hold = round(max(floor, rng.uniform(low, high) * scale), 1)
                free = [target for target in _targets(kind) if target not in {c[1] for c in chosen}]
                if not free:
                    break
                chosen.append((kind, rng.choice(free), hold))
            if len(chosen) < len(kinds):
                continue  # the two kinds need one target (a door hung and killed): another deck's pair
            at = round(max(t, *(busy[target] for _, target, _ in chosen)), 1)
            if at + max(hold for *_, hold in chosen) >= end:
                continue
            pair = 0
            if len(chosen) == 2:
                pairs += 1
                pair = pairs
            for kind, target, hold in chosen:
                plan.append(Fault(at, kind, target, hold, pair))
                busy[target] = at + hold + TARGET_REST


def plan_text(plan: list[Fault]) -> str:
    lines = [f"{len(plan)} faults: " + ", ".join(f"{k} {n}" for k, n in sorted(Counter(f.kind for f in plan).items()))]
    for fault in plan:
        pair = f"  (pair {fault.pair})" if fault.pair else ""
        lines.append(f"{fault.at:8.1f} s  {fault.kind:15} {fault.target:22} hold {fault.hold:6.1f} s{pair}")
    return "\n".join(lines)


# -- running a soak --------------------------------------------------------------------------------
def _utc() -> datetime:
    return datetime.now(UTC)


def _say(text: str) -> None:
    print(f"{_utc():%H:%M:%S} {text}", flush=True)


@dataclass
class Injected:
    """A fault of the plan as it happened."""

    fault: Fault
    began: datetime | None = None
    ended: datetime | None = None
    note: str = ""
    state: dict = field(default_factory=dict)


class MemoryGroup:
    """A cgroup v1 memory group under our own, whose limit the kernel's OOM killer enforces."""

    def __init__(self, name: str) -> None:
        mine = next(
            line.split(":", 2)[2]
            for line in Path("/proc/self/cgroup").read_text().splitlines()
            if line.split(":", 2)[1] == "memory"
        )
        self.parent = Path("/sys/fs/cgroup/memory") / mine.lstrip("/")
        self.path = self.parent / name

    def create(self, pids: list[int], margin: int) -> int:
        """Move ``pids`` in and limit the group to what they use plus ``margin`` bytes; the limit."""
        self.path.mkdir(exist_ok=True)
        # Asked to bring their pages along, which kernels since 6.8 no longer do (here, 6.18:
        # usage 0 after the move): the group then counts only what they touch from now on, and
        # the limit falls to that plus the margin at the first tighten. Their next growth meets it.
        with contextlib.suppress(OSError):
            (self.path / "memory.move_charge_at_immigrate").write_text("3")
        for pid in pids:
            with contextlib.suppress(OSError):
                (self.path / "cgroup.procs").write_text(str(pid))
        usage = int((self.path / "memory.usage_in_bytes").read_text())
        resident = sum(_rss(pid) for pid in pids)  # over-counts the pages a prefork pool shares
        limit = (usage if usage >= resident // 4 else resident) + margin
        (self.path / "memory.limit_in_bytes").write_text(str(limit))
        return limit

    def tighten(self, margin: int) -> None:
        """The limit down to what the group cannot give back plus ``margin``, never up. An idle
        worker barely grows, and its page cache is given back before anything is killed: a limit
        set once a little above its use may never be met (docs/soak.md). One that follows its
        anonymous, mapped and shared pages is met at its next growth."""
        with contextlib.suppress(OSError, ValueError):
            stat = dict(line.split() for line in (self.path / "memory.stat").read_text().splitlines())
            held = sum(int(stat.get(f"total_{name}", 0)) for name in ("rss", "mapped_file", "shmem"))
            usage = int((self.path / "memory.usage_in_bytes").read_text())
            limit = int((self.path / "memory.limit_in_bytes").read_text())
            for target in (held + margin, usage + margin):
                if target < limit:
                    try:
                        # EBUSY when the cache cannot be reclaimed down to it: the looser target.
                        (self.path / "memory.limit_in_bytes").write_text(str(target))
                        return
                    except OSError:
                        continue

    def oom_kills(self) -> int:
        with contextlib.suppress(OSError):
            for line in (self.path / "memory.oom_control").read_text().splitlines():
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
        return 0

    def remove(self) -> None:
        if not self.path.is_dir():
            return
        with contextlib.suppress(OSError):
            (self.path / "memory.limit_in_bytes").write_text("-1")
        for pid in (self.path / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError):
                (self.parent / "cgroup.procs").write_text(pid)
        with contextlib.suppress(OSError):
            self.path.rmdir()


def _rss(pid: int) -> int:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def fill(folder: Path) -> int:
    """Write into ``folder`` until its filesystem says ENOSPC; the bytes written."""
    written = 0
    chunk = b"\0" * (1 << 20)
    with open(folder / f"soak-filler-{time.monotonic_ns()}", "wb", buffering=0) as out:
        try:
            while True:
                written += out.write(chunk)
        except OSError:
            pass
    return written


def adler32_of(path: Path) -> str:
    value = 1
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            value = zlib.adler32(block, value)
    return f"{value:08x}"


class Soak:
    def __init__(self, seed: int, minutes: float, var_dir: Path, drain_minutes: float) -> None:
        self.seed, self.minutes, self.var = seed, minutes, var_dir
        self.drain = drain_minutes * 60
        self.plan = fault_plan(seed, minutes)
        self.injected: list[Injected] = []
        self.checked: dict[int, dict] = {}
        self.start_errors: Counter[str] = Counter()
        self.stop_keeper = threading.Event()
        self.starting = True
        self.started_runs: list[int] = []

    # -- set-up: everything through devsite, started from this (main) thread, which they die with
    def start_services(self) -> None:
        from devsite.services import ServiceDirs, Services, claim, secrets_key_env

        dirs = ServiceDirs(self.var, "soak")
        # Held for the soak's life: a `devsite.launch --set soak` (to read its database) would
        # otherwise take its PostgreSQL and Redis for a crashed launcher's and stop them.
        self.claimed = claim(dirs)
        self.services = Services(dirs, durable=True, say=_say)
        self.services.start()
        os.environ.update(self.services.env())
        os.environ.update(secrets_key_env(self.var))

    def mount_tmpfs(self) -> Path:
        import subprocess

        folder = self.var / "doors" / FULL_DOOR / "data"
        folder.mkdir(parents=True, exist_ok=True)
        if os.path.ismount(folder):
            subprocess.run(["umount", str(folder)], check=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE},mode=0755", "soak", str(folder)], check=True)
        self.tmpfs = folder
        return folder

    def start_site(self) -> None:
        import django

        django.setup()
        from django.core.management import call_command

        from campaigns.runs.versions import xrootd_server_version
        from devsite.demo import register_demo_pool, register_demo_site
        from devsite.site_children import (
            beat_argv,
            client_argv,
            collector_argv,
            control_worker_argv,
            door_restart,
            door_watches,
            worker_argv,
        )
        from devsite.supervisor import Supervisor
        from devsite.xrootd_server import XRootDServer, free_port

        call_command("migrate", verbosity=0, interactive=False)
        log_dir = self.var / "log"
        log_dir.mkdir(parents=True, exist_ok=True)
        self.supervisor = Supervisor(self.var / "run" / "children", say=_say, log_dir=log_dir)
        self.doors: dict[str, XRootDServer] = {}
        tmpfs = self.mount_tmpfs()
        for name in DOORS:
            data = tmpfs if name == FULL_DOOR else self.var / "doors" / name / "data"
            door = XRootDServer(name=name, data_dir=data, port=free_port(), workdir=self.var / "doors" / name / "run")
            door.start()
            self.supervisor.watch(name, door.process, restart=door_restart(door))
            self.doors[name] = door
        sweep = register_demo_site(
            {name: door.root_url_for("/data/demo/") for name, door in self.doors.items()},
            xrootd_version=xrootd_server_version(self.doors["door1"].root_url),
            watches={name: door_watches(door) for name, door in self.doors.items()},
        )
        clients = register_demo_pool(sweep)
        self.fts = self._fts_double()
        self.campaigns = self._campaigns(sweep)
        env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="1")
        self.supervisor.start("worker", worker_argv("soak"), env, str(ROOT))
        self.supervisor.start("control", control_worker_argv("soak"), env, str(ROOT))
        self.supervisor.start("beat", beat_argv(), env, str(ROOT))
        for name in DOORS:
            self.supervisor.start(f"collector-{name}", collector_argv(name), env, str(ROOT))
        for client in clients:
            self.supervisor.start(f"client-{client}", client_argv(client), env, str(ROOT))

    def _campaigns(self, sweep) -> list:
        from campaigns.models import Campaign

        spec = {
            "create_sources": True,
            "file_count": 8,
            "file_size": 1_000_000,
            "source_file_count": 2,
            "concurrency_steps": [2, 4],
            "step_files": 4,
            "checksum_mode": "both",
            # A hung door's copies must end by their deadline, not hold the run for minutes.
            "timeout": 60,
            "retries": 1,
        }
        made = []
        fts = {"engine": "fts", "engine_options": {"instance": self.fts_instance.pk}}
        for name, pooled, engine in (("soak-gfal2", False, {}), ("soak-pool", True, {}), ("soak-fts", False, fts)):
            about = {"description": "benchmarks/soak.py: copies kept running under faults."}
            campaign, _ = Campaign.objects.update_or_create(name=name, defaults={**spec, **engine, **about})
            campaign.sources.set(sweep.sources.all())
            campaign.destinations.set(sweep.destinations.all())
            if pooled:
                from collectors.models import Host

                campaign.clients.set(Host.objects.filter(name__in=CLIENTS))
            made.append(campaign)
        # Alerts about everything, by mail to a server that is not there: each delivery is kept
        # with its outcome, which is what the report counts.
        from alerts.models import Subscription

        Subscription.objects.update_or_create(
            name="soak", defaults={"email": "soak@localhost", "min_interval_minutes": 1, "active": True}
        )
        return made

    def _fts_double(self):
        """The FTS double, in this process, and the FtsInstance that points at it."""
        from campaigns.runs.engines.fts.models import FtsInstance
        from tests.support.fts_double import FtsDouble

        # FTS's optimizer decides every 60 s by default; 5 s keeps a soak's short steps moving.
        token = secrets.token_urlsafe(24)  # the double asks for a bearer token, as FTS does
        double = FtsDouble(token=token, optimizer_interval=5.0).start()
        self.fts_instance, _ = FtsInstance.objects.update_or_create(
            name="soak-fts-double",
            defaults={"url": double.url, "bearer_token": token, "files_per_job": 4, "poll_seconds": 1.0,
                      "notes": "benchmarks/soak.py: a double of FTS 3.14, in the soak's process."},
        )  # fmt: skip
        return double

    # -- the keeper: campaigns kept running, ended runs checked against the disks -------------
    def keep(self) -> None:
        from django.db import close_old_connections

        from campaigns import runs
        from campaigns.models import Run

        while not self.stop_keeper.wait(2.0):
            try:
                if self.starting:
                    for campaign in self.campaigns:
                        if not Run.objects.filter(campaign=campaign, state__in=LIVE).exists():
                            run = runs.start_run(campaign, by=runs.command_starter("soak"), trigger="command")
                            self.started_runs.append(run.pk)
                self.check_ended()
            except Exception as exc:  # noqa: BLE001 -- the database or broker is down: a fault of the plan
                self.start_errors[type(exc).__name__] += 1
                close_old_connections()

    def check_ended(self) -> None:
        from campaigns.models import Run

        ended = Run.objects.filter(campaign__in=self.campaigns).exclude(state__in=LIVE).exclude(pk__in=self.checked)
        for run in ended:
            self.checked[run.pk] = self.check_run(run)

    def check_run(self, run) -> dict:
        """Each succeeded copy's file on the destination door, with its size and adler32; then
        the run's folders are removed from both doors (the tmpfs is small)."""
        import shutil

        found = Counter()
        destinations = Counter()
        for transfer in run.transfers.filter(state="succeeded"):
            destinations[transfer.destination] += 1
            path = self._local(transfer.destination)
            if path is None or not path.is_file():
                found["missing"] += 1
                continue
            recorded = transfer.destination_checksum.split(":")[-1].lower().zfill(8)
            if path.stat().st_size != transfer.size:
                found["wrong_size"] += 1
            elif recorded and adler32_of(path) != recorded:
                found["wrong_checksum"] += 1
            else:
                found["ok"] += 1
        found["twice"] = sum(n - 1 for n in destinations.values() if n > 1)
        recorded_paths = {self._local(t.destination) for t in run.transfers.filter(state="succeeded")}
        records = {
            self._local(destination): f"{state} {category or '-'}"
            for destination, state, category in run.transfers.values_list("destination", "state", "error_category")
        }
        for door in self.doors.values():
            # The run's copies (…/runs/run-<id>/) and the sources it made (…/source/run-<id>-sources/).
            for pattern in (f"**/run-{run.pk}", f"**/run-{run.pk}-sources"):
                for folder in door.data_dir.glob(pattern):
                    if pattern.endswith(f"run-{run.pk}"):
                        for stray in (p for p in folder.rglob("*") if p.is_file() and p not in recorded_paths):
                            # What its copy's record says: a copy whose door died or hung could
                            # not have its partial file removed; a failed copy on a live door could.
                            found["unrecorded_files"] += 1
                            found[f"unrecorded: {records.get(stray, 'no record')}, run {run.state}"] += 1
                    shutil.rmtree(folder, ignore_errors=True)
        return dict(found)

    def _local(self, url: str) -> Path | None:
        parts = urlsplit(url)
        for door in self.doors.values():
            if parts.port == door.port:
                return door.local_path("/" + parts.path.lstrip("/"))  # root:// URLs carry "//data/…"
        return None

    # -- the faults ------------------------------------------------------------------------------
    def _child(self, name: str):
        return next(child for child in self.supervisor.children if child.name == name)

    def ready(self, target: str) -> bool:
        """Whether the target's process runs (a supervised child not waiting for its restart);
        the servers are started again by the fault that stopped them, so always."""
        child = next((c for c in self.supervisor.children if c.name == target), None)
        return child is None or (child.due is None and child.returncode is None)

    def begin(self, item: Injected) -> None:
        from devsite.processes import session_members, signal_session

        fault = item.fault
        item.began = _utc()
        kind, target = fault.kind, fault.target
        if kind in ("door_kill", "worker_kill", "client_kill"):
            pid = self._child(target).pid
            item.state["pid"] = pid
            os.kill(pid, signal.SIGKILL)
            item.note = f"pid {pid} SIGKILLed"
        elif kind == "door_hang":
            pid = self._child(target).pid
            item.state["pid"] = pid
            os.kill(pid, signal.SIGSTOP)
            item.note = f"pid {pid} SIGSTOPped"
        elif kind == "collector_stop":
            pid = self._child(target).pid
            item.state["pid"] = pid
            signal_session(pid, signal.SIGSTOP)
            item.note = f"session {pid} SIGSTOPped"
        elif kind == "door_full":
            written = fill(self.tmpfs)
            item.note = f"filled with {written / 1e6:.0f} MB"
        elif kind == "worker_oom":
            pid = self._child("worker").pid
            group = MemoryGroup(f"storageops-soak-{os.getpid()}-{len(self.injected)}")
            limit = group.create(session_members(pid), margin=OOM_MARGIN)
            item.state.update(pid=pid, group=group, kills=group.oom_kills())
            item.note = f"worker pid {pid} and its pool under a {limit / 2**20:.0f} MiB memory limit"
        elif kind == "redis_kill":
            redis = self.services.redis
            item.state["port"] = redis.port
            os.kill(redis.proc.pid, signal.SIGKILL)
            redis.proc.wait(timeout=30)
            redis.stop()
            item.note = "SIGKILLed"
        elif kind == "postgres_stop":
            pg = self.services.postgres
            item.state["port"] = pg.port
            os.kill(pg.proc.pid, signal.SIGQUIT)  # the immediate shutdown: no checkpoint, clients cut
            pg.proc.wait(timeout=60)
            pg.stop()
            item.note = "stopped (immediate)"
        _say(f"fault {kind} on {target}: {item.note}")

    def tick(self, item: Injected) -> None:
        """While a fault lasts: a full disk stays full (the keeper's clean-up frees space)."""
        if item.fault.kind == "door_full":
            fill(self.tmpfs)
        elif item.fault.kind == "worker_oom":
            group = item.state["group"]
            group.tighten(OOM_MARGIN)
            if group.oom_kills() > item.state["kills"] and "oom_seen" not in item.state:
                item.state["oom_seen"] = _utc()
                _say("worker_oom: the kernel's OOM killer struck in the worker's group")

    def finish(self, item: Injected) -> bool:
        """End the fault (continue, free, restart); True once it is over."""
        from devsite.processes import signal_session
        from devsite.xrootd_server import xroot_ping

        kind, target = item.fault.kind, item.fault.target
        if kind in ("door_kill", "worker_kill", "client_kill"):
            child = self._child(target)
            if child.pid == item.state["pid"] or child.due is not None:
                return False  # not restarted yet
            if kind == "door_kill" and not xroot_ping(self.doors[target].port):
                return False
        elif kind == "door_hang":
            os.kill(item.state["pid"], signal.SIGCONT)
        elif kind == "collector_stop":
            signal_session(item.state["pid"], signal.SIGCONT)
        elif kind == "door_full":
            for filler in self.tmpfs.glob("soak-filler-*"):
                filler.unlink()
        elif kind == "worker_oom":
            group = item.state["group"]
            kills = group.oom_kills() - item.state["kills"]
            if not kills and (_utc() - item.began).total_seconds() < OOM_WAIT * item.fault.hold:
                self.tick(item)
                return False  # a worker that has not grown yet: held until it does (or long enough)
            group.remove()
            item.note += f"; {kills} OOM kill(s)" if kills else "; no OOM kill before the limit was lifted"
            item.state["oom_kills"] = kills
        elif kind == "redis_kill":
            self.services.redis.start(port=item.state["port"])
        elif kind == "postgres_stop":
            self.services.postgres.start(port=item.state["port"])
        item.ended = _utc()
        _say(f"fault {kind} on {target} over after {(item.ended - item.began).total_seconds():.1f} s")
        return True

    def run(self) -> dict:
        t0 = time.monotonic()
        self.t0 = _utc()
        keeper = threading.Thread(target=self.keep, name="soak-keeper", daemon=True)
        keeper.start()
        pending = list(self.plan)
        active: list[Injected] = []
        total = self.minutes * 60
        while True:
            now = time.monotonic() - t0
            self.supervisor.tend()
            while pending and pending[0].at <= now:
                if not self.ready(pending[0].target) and now - pending[0].at < READY_WAIT:
                    break  # its process is down (killed just before, restarting): once it is back
                item = Injected(pending.pop(0))
                item.state["t"] = now
                self.injected.append(item)
                try:
                    self.begin(item)
                    active.append(item)
                except Exception as exc:  # noqa: BLE001 -- said, counted, and the soak goes on
                    item.note = f"could not inject: {exc}"
                    _say(f"fault {item.fault.kind} on {item.fault.target}: {item.note}")
            for item in list(active):
                if now >= item.state["t"] + item.fault.hold:
                    try:
                        if self.finish(item):
                            active.remove(item)
                    except Exception as exc:  # noqa: BLE001 -- a restart that failed: tried again
                        _say(f"ending {item.fault.kind} on {item.fault.target} failed: {exc}; trying again")
                else:
                    self.tick(item)
            if now >= total and not active:
                break
            time.sleep(0.2)
        _say("the plan is done; no new runs, waiting for the live ones to end")
        self.starting = False
        self.end_of_faults = _utc()
        deadline = time.monotonic() + self.drain
        from django.db import DatabaseError, connection

        from campaigns.models import Run

        while time.monotonic() < deadline:
            self.supervisor.tend()
            try:
                if not Run.objects.filter(campaign__in=self.campaigns, state__in=LIVE).exists():
                    break
            except DatabaseError:
                connection.close()  # this thread's connection died with a PostgreSQL the plan stopped
            time.sleep(1)
        time.sleep(3)
        self.stop_keeper.set()
        keeper.join(timeout=120)
        connection.close()
        self.check_ended()
        self.save_state()
        return self.report()

    @property
    def state_path(self) -> Path:
        return self.var / f"soak-state-seed{self.seed}-{self.minutes:g}min.json"

    def save_state(self) -> None:
        """What the report needs beside the database: a report may be made again from it
        (--report-from) if making it failed."""
        state = {
            "seed": self.seed,
            "minutes": self.minutes,
            "t0": self.t0.isoformat(),
            "campaigns": [c.name for c in self.campaigns],
            "checked": self.checked,
            "start_errors": dict(self.start_errors),
            "injected": [
                {
                    "fault": asdict(i.fault),
                    "began": i.began and i.began.isoformat(),
                    "ended": i.ended and i.ended.isoformat(),
                    "note": i.note,
                }
                for i in self.injected
            ],
        }
        self.state_path.write_text(json.dumps(state, indent=1) + "\n")

    @classmethod
    def from_state(cls, path: Path, var_dir: Path) -> Soak:
        from campaigns.models import Campaign

        state = json.loads(path.read_text())
        soak = cls(state["seed"], state["minutes"], var_dir, 0)
        soak.t0 = datetime.fromisoformat(state["t0"])
        soak.campaigns = list(Campaign.objects.filter(name__in=state["campaigns"]))
        soak.checked = {int(pk): found for pk, found in state["checked"].items()}
        soak.start_errors = Counter(state["start_errors"])
        for item in state["injected"]:
            stamp = {k: item[k] and datetime.fromisoformat(item[k]) for k in ("began", "ended")}
            soak.injected.append(Injected(Fault(**item["fault"]), note=item["note"], **stamp))
        return soak

    def stop(self) -> None:
        import subprocess

        # Each step whatever the one before it did: a mount or a server left behind outlives us.
        steps = [lambda: [item.state["group"].remove() for item in self.injected if "group" in item.state]]
        if getattr(self, "supervisor", None) is not None:
            steps.append(lambda: self.supervisor.stop_all(grace=3.0))
        if getattr(self, "fts", None) is not None:
            steps.append(self.fts.stop)
        steps += [door.stop for door in getattr(self, "doors", {}).values()]
        if getattr(self, "tmpfs", None) is not None:
            steps.append(lambda: subprocess.run(["umount", "-l", str(self.tmpfs)], check=False))
        if getattr(self, "services", None) is not None:
            steps.append(self.services.stop)
        if getattr(self, "claimed", None) is not None:
            steps.append(lambda: self.claimed.unlink(missing_ok=True))
        for step in steps:
            try:
                step()
            except BaseException as exc:  # noqa: BLE001 -- a second Ctrl-C still lets the rest run
                _say(f"stopping: {exc!r}; going on")

    # -- the report ------------------------------------------------------------------------------
    def report(self) -> dict:
        from alerts.models import Delivery
        from campaigns.models import Run, Transfer
        from collectors.models import Event

        soak_runs = Run.objects.filter(campaign__in=self.campaigns, created__gte=self.t0)
        transfers = Transfer.objects.filter(run__in=soak_runs)
        checked = Counter()
        for pk, found in self.checked.items():
            if pk in set(soak_runs.values_list("pk", flat=True)):
                checked.update(found)
        by_state = Counter(transfers.values_list("state", flat=True))
        faults = []
        for item in self.injected:
            faults.append(self._fault_report(item, Transfer, Event))
        recovery: dict[str, list[float]] = defaultdict(list)
        for fault in faults:
            if fault["recovery_s"] is not None:
                recovery[fault["kind"]].append(fault["recovery_s"])
        return {
            "seed": self.seed,
            "minutes": self.minutes,
            "began": self.t0.isoformat(),
            "faults_by_kind": dict(Counter(f["kind"] for f in faults)),
            "pairs": len({i.fault.pair for i in self.injected if i.fault.pair}),
            "runs_started": soak_runs.count(),
            "runs_by_state": dict(Counter(soak_runs.values_list("state", flat=True))),
            "runs_by_campaign": {
                name: dict(Counter(soak_runs.filter(campaign__name=name).values_list("state", flat=True)))
                for name in sorted(set(soak_runs.values_list("campaign__name", flat=True)))
            },
            "runs_live_after_drain": soak_runs.filter(state__in=LIVE).count(),
            "files_planned": transfers.count(),
            "transfers_by_state": dict(by_state),
            "failed_by_category": dict(
                Counter(transfers.filter(state="failed").values_list("error_category", flat=True))
            ),
            "files_recorded": by_state.get("succeeded", 0),
            "files_on_disk_matching": checked.get("ok", 0),
            "files_lost": checked.get("missing", 0) + checked.get("wrong_size", 0) + checked.get("wrong_checksum", 0),
            "lost_detail": {k: checked.get(k, 0) for k in ("missing", "wrong_size", "wrong_checksum")},
            "recorded_twice": checked.get("twice", 0),
            "files_on_disk_not_recorded": checked.get("unrecorded_files", 0),
            "not_recorded_by_record": {
                k.removeprefix("unrecorded: "): n for k, n in sorted(checked.items()) if k.startswith("unrecorded: ")
            },
            "left_live": by_state.get("queued", 0) + by_state.get("active", 0),
            "runs_unchecked": soak_runs.exclude(pk__in=list(self.checked)).count(),
            "recovery_by_kind": {
                kind: {"n": len(v), "median_s": round(statistics.median(v), 1), "worst_s": round(max(v), 1)}
                for kind, v in sorted(recovery.items())
            },
            "event_log_by_kind": dict(self._coverage(faults)),
            "keeper_errors": dict(self.start_errors),
            "alerts_by_kind": dict(Counter(Delivery.objects.filter(time__gte=self.t0).values_list("kind", flat=True))),
            "faults": faults,
        }

    def _fault_report(self, item: Injected, Transfer, Event) -> dict:
        fault, began, ended = item.fault, item.began, item.ended
        out = {**asdict(fault), "began": began and began.isoformat(), "ended": ended and ended.isoformat(),
               "note": item.note, "recovery_s": None, "events": [], "recorded_as": None}  # fmt: skip
        if began is None or ended is None:
            return out
        first = (
            Transfer.objects.filter(run__campaign__in=self.campaigns, state="succeeded", finished_at__gt=ended)
            .order_by("finished_at")
            .values_list("finished_at", flat=True)
            .first()
        )
        out["recovery_s"] = round((first - ended).total_seconds(), 1) if first else None
        since = began - timedelta(seconds=last_alive_seconds())
        window = Event.objects.filter(time__gte=since, time__lte=ended + timedelta(seconds=300))
        if fault.kind in CARRIED:  # a disk full (a door hung) since an earlier fault carries this one too
            hour = began - timedelta(hours=1)
            window |= Event.objects.filter(kind=CARRIED[fault.kind], time__gte=hour, time__lt=since)
        events = list(window.values("time", "kind", "summary", "host__name", "run_id", "detail"))
        out["events"] = [
            {"time": e["time"].isoformat(), "kind": e["kind"], "summary": e["summary"], "host": e["host__name"]}
            for e in events
            if e["kind"] not in ("run_start", "run_end")
        ]
        pid = re.search(r"pid (\d+)", item.note or "")
        out["records"] = _records(fault, began, ended, events, int(pid.group(1)) if pid else None)
        if fault.kind == "worker_oom" and "no OOM kill" in item.note:
            out["records"] = []  # nothing died: a run resumed then was another fault's
        out["recorded_as"] = out["records"][0] if out["records"] else None
        if fault.kind == "door_full":
            # What the copies met, if any did: the one record of a fill the door's stopped
            # collector could not see (only the soak's tmpfs door fills).
            out["copies_episode"] = next(
                (e["summary"] for e in events
                 if e["kind"] == "run_incident" and e["summary"].startswith("No space left on root://")
                 and began - timedelta(seconds=1) <= e["time"] <= ended + timedelta(seconds=SEEN)),
                None,
            )  # fmt: skip
        from alerts.models import Delivery

        alerts = Delivery.objects.filter(time__gte=began, time__lte=ended + timedelta(seconds=180))
        out["alerts"] = [f"{a['kind']}: {a['subject']}" for a in alerts.values("kind", "subject")]
        if fault.kind == "collector_stop" and not out["recorded_as"]:
            # Told while the collector was silent: once it is heard again no check tells it, so
            # an alert after that is the next silence's.
            host = fault.target.removeprefix("collector-")
            silent = (
                alerts.filter(kind="collector_silent", host__name=host, time__lte=ended + timedelta(seconds=TOLD_LAG))
                .values_list("subject", flat=True)
                .first()
            )
            out["records"] = [f"alert: {silent}"] if silent else []
            out["recorded_as"] = out["records"][0] if silent else None
        out["copy_failures"] = dict(
            Counter(
                Transfer.objects.filter(
                    run__campaign__in=self.campaigns,
                    state="failed",
                    finished_at__gte=began,
                    finished_at__lte=ended + timedelta(seconds=60),
                ).values_list("error_category", flat=True)
            )
        )
        return out

    def _coverage(self, faults: list[dict]):
        found: dict[str, Counter] = defaultdict(Counter)
        for fault in faults:
            records = fault.get("records") or ([fault["recorded_as"]] if fault["recorded_as"] else [])
            if fault["kind"] == "worker_oom" and "no OOM kill" in fault["note"]:
                found["worker_oom"]["no OOM kill happened"] += 1
            elif fault["kind"] in ("worker_kill", "worker_oom", "door_kill", "client_kill"):
                # A worker's death resumes each of its runs; a door's restart is "stopped" + "started";
                # a client's death is its own event and the driver's re-planning of its copies.
                found[fault["kind"]]["recorded" if records else "not recorded"] += 1
            elif not records and fault["kind"] in ("door_hang", "door_full") and _unwatched(fault, faults):
                # Its copies' episode is then the product's one record of it, if a copy met it.
                said = "collector stopped through it: " + (
                    "recorded by its copies' episode" if fault.get("copies_episode") else "not seen"
                )
                found[fault["kind"]][said] += 1
            else:
                said = {0: "not recorded", 1: "recorded once"}.get(len(records), "recorded more than once")
                found[fault["kind"]][said] += 1
        return {kind: dict(counts) for kind, counts in sorted(found.items())}


def _unwatched(fault: dict, faults: list[dict]) -> bool:
    """Whether the fault's door had its collector stopped from before the fault to after it:
    nothing on the door watched it then (the copies' own episodes aside)."""
    return any(
        other["kind"] == "collector_stop"
        and other["target"] == f"collector-{fault['target']}"
        and other["began"] is not None
        and other["began"] <= fault["began"]
        and (other.get("ended") or "9") >= (fault.get("ended") or "9")
        for other in faults
    )


LIVE = ("pending", "running", "cancelling")


def last_alive_seconds() -> float:
    """How long before its kill a dead worker's event may be dated: it says when the worker
    was last known alive, up to a beat (and a little) before."""
    from collectors.worker_lives import BEAT_SECONDS

    return BEAT_SECONDS + 2


def _records(fault: Fault, began: datetime, ended: datetime, events: list[dict], pid: int | None = None) -> list[str]:
    """The events that say what this fault was (ideally exactly one), by what each kind leaves:
    an outage event, a restart logged by the door's collector, a storage-fault episode naming
    the door, a client lost, a run resumed after its driver died."""

    def within(event: dict, before: float, after: float) -> bool:
        return began - timedelta(seconds=before) <= event["time"] <= ended + timedelta(seconds=after)

    kind = fault.kind
    found = []
    for event in events:
        summary = event["summary"]
        if kind in ("redis_kill", "postgres_stop"):
            # The outage's own start and end: seen down before the server was back (or since the
            # last probe of a watcher killed meanwhile, before the kill), and back after the kill.
            label = "Broker (Redis) unreachable" if kind == "redis_kill" else "Database unreachable"
            span = _outage_span(event) if summary.startswith(label) else None
            hit = span is not None and span[0] <= ended + timedelta(seconds=SEEN) and span[1] >= began
        elif kind == "door_kill":
            # Logged by the door's collector, late when the plan had stopped that collector too.
            hit = event["kind"] == "service_restart" and event["host__name"] == fault.target and within(event, 1, 300)
        elif kind == "door_hang":
            # The door's collector sees its daemon stopped: one event with the hang's length. Its
            # copies' deadline episodes are the copies' story, not the hang's record.
            # First seen at the collector's next sample, or when a collector stopped meanwhile
            # runs again while the door still hangs: never after the hang. A hang begun while
            # the collector was stopped, not having seen the one before end, is that one's event.
            ours = event["kind"] == "service_hung" and event["host__name"] == fault.target
            carried = event["time"] < began and _open_at(event, began) and f"pid {pid} stopped" in summary
            hit = ours and (within(event, 1, SEEN) or carried)
        elif kind == "door_full":
            # The door's collector sees its data folder full: one event with the fill's length,
            # whether or not a copy met it. The copies' "No space left on root://…" episode is
            # the copies' story (as deadlines are a hang's).
            # A fill that begins while the disk is still full of the one before (freed for less
            # than a collector's sample) is that event's too: the disk was never seen with room.
            ours = event["kind"] == "disk_full" and event["host__name"] == fault.target
            hit = ours and (within(event, 1, SEEN) or (event["time"] < began and _open_at(event, began)))
        elif kind == "client_kill":
            # The driver sees its copies lost, if it held any; the client, started again, says
            # it died either way (its node is client-<host>@<machine>).
            said = summary.startswith(f"Client {fault.target.removeprefix('client-')} lost") and within(event, 0, 60)
            died = summary.startswith(f"Worker {fault.target}@") and f"(pid {pid})" in summary
            hit = said or (event["kind"] == "worker_lost" and died)
        elif kind in ("worker_kill", "worker_oom"):
            # Its runs' drivers died with it: the next driver resumes them once their lease is
            # over. The worker, started again, says it died; a pool process the OOM killer took
            # is said by the worker that lives on.
            hit = (" resumed by driver " in summary and within(event, 0, 120)) or (
                event["kind"] == "worker_lost"
                and (summary.startswith("Worker soak@") or summary.startswith("Worker pool process lost"))
                and within(event, last_alive_seconds(), 120)
            )
        else:
            hit = False
        if hit:
            found.append(summary)
    return found


def _outage_span(event: dict) -> tuple[datetime, datetime] | None:
    """An outage event's start and end, from its detail (collectors.outages writes them)."""
    try:
        detail = json.loads(event["detail"])
        return datetime.fromisoformat(detail["start"]), datetime.fromisoformat(detail["end"])
    except (TypeError, ValueError, KeyError):
        return None


def _open_at(event: dict, moment: datetime) -> bool:
    """Whether a collector's episode event (a full disk) was still open at ``moment``: not yet
    given its end, or ended after it (its detail says "ended <ISO time>, after …")."""
    found = re.search(r"\nended (\S+?)[,\s]", event["detail"] or "")
    return found is None or datetime.fromisoformat(found.group(1)) >= moment


def report_text(report: dict) -> str:
    lines = [
        f"soak: seed {report['seed']}, {report['minutes']} min, began {report['began']}",
        "faults by kind: "
        + ", ".join(f"{k} {n}" for k, n in sorted(report["faults_by_kind"].items()))
        + f" (total {sum(report['faults_by_kind'].values())}, {report['pairs']} pairs at once)",
        f"runs: {report['runs_started']} started; by state {report['runs_by_state']}; "
        f"live after the drain {report['runs_live_after_drain']}",
        "runs by campaign: " + "; ".join(f"{k} {v}" for k, v in report.get("runs_by_campaign", {}).items()),
        f"files: {report['files_planned']} planned, {report['files_recorded']} recorded succeeded, "
        f"{report['files_on_disk_matching']} on disk with size and adler32 matching, {report['files_lost']} lost "
        f"{report['lost_detail']}, {report['recorded_twice']} recorded twice, {report['left_live']} left live, "
        f"{report['files_on_disk_not_recorded']} on disk but not recorded succeeded",
        f"on disk but not recorded succeeded, by their copy's record: {report.get('not_recorded_by_record', {})}",
        f"transfers by state: {report['transfers_by_state']}; failed by category: {report['failed_by_category']}",
        "recovery (fault's end to the next copy that succeeded):",
        *(
            f"  {kind:15} n={v['n']:3}  median {v['median_s']:6.1f} s  worst {v['worst_s']:6.1f} s"
            for kind, v in report["recovery_by_kind"].items()
        ),
        "event log, per fault kind (recorded as what it was / not):",
        *(f"  {kind:15} {counts}" for kind, counts in report["event_log_by_kind"].items()),
        f"alerts sent (deliveries, by kind): {report['alerts_by_kind']}",
        f"keeper errors (calls that met an outage): {report['keeper_errors']}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=float(os.environ.get("SOAK_MINUTES", 60)))
    parser.add_argument("--seed", type=int, default=int(os.environ.get("SOAK_SEED", 48)))
    parser.add_argument("--drain-minutes", type=float, default=5.0, help="how long live runs may take to end")
    parser.add_argument("--plan", action="store_true", help="print the fault plan and start nothing")
    parser.add_argument("--report-from", type=Path, help="make the report again from a soak's saved state")
    args = parser.parse_args(argv)
    if args.plan:
        print(plan_text(fault_plan(args.seed, args.minutes)))
        return 0
    if os.geteuid() != 0:
        raise SystemExit("the soak mounts a tmpfs and sets cgroup memory limits: run it as root")
    var = Path(os.environ.get("SOAK_VAR_DIR") or ROOT / "var" / "soak")
    os.environ.update(
        STORAGEOPS_VAR_DIR=str(var),
        DJANGO_SETTINGS_MODULE="storageops.settings",
        GFAL_PYTHONBIN="/usr/bin/python3",
        STORAGEOPS_QUEUE_PREFIX=f"soak-{args.seed}-",
        # A collector stopped for minutes is alerted within the soak's scaled-down holds.
        STORAGEOPS_COLLECTOR_SILENT_SECONDS="60",
    )
    for name in ("DATABASE_URL", "CELERY_BROKER_URL"):
        os.environ.pop(name, None)  # the soak's own, which it kills
    sys.path.insert(0, str(ROOT))
    from devsite import processes
    from devsite.xrootd_server import live_server_processes

    processes.stop_children_on_signals(extra=live_server_processes)
    if args.report_from:
        servers = Soak(args.seed, args.minutes, var, 0)  # only its PostgreSQL and Redis, started again
        try:
            servers.start_services()
            import django

            django.setup()
            soak = Soak.from_state(args.report_from, var)
            report = soak.report()
        finally:
            servers.stop()
        args.seed, args.minutes = soak.seed, soak.minutes
    else:
        soak = Soak(args.seed, args.minutes, var, args.drain_minutes)
        _say(plan_text(soak.plan).splitlines()[0])
        try:
            soak.start_services()
            soak.start_site()
            report = soak.run()
        finally:
            soak.stop()
    text = report_text(report)
    print(text, flush=True)
    stem = var / f"soak-report-seed{args.seed}-{args.minutes:g}min"
    stem.with_suffix(".json").write_text(json.dumps(report, indent=1, default=str) + "\n")
    stem.with_suffix(".txt").write_text(text + "\n")
    _say(f"report: {stem}.json / .txt")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A lasting slowdown under a real Celery beat (issue 34's must-show), every part a real process.

A scheduled campaign door1 -> door2 (real XRootD doors on free loopback ports, davs, streamed,
adler32 at both ends) fired by a real ``celery beat`` on the database scheduler, copied by a real
worker, door2 watched by its real collector (``manage.py collector``: its config file and its
xrootd's pid). Quiet runs, then door2 restarted with XRootD's throttle lowered (the collector
logs the restart and the config change), slowed runs, then the throttle undone and runs after
it. Alerts go to a real SMTP server and a real HTTP receiver in this process. At the end the
first slowed run is accepted as the new normal and the first run back judged again.

Prints the per-run table docs/verdicts.md shows and the alerts that arrived. Own database and
broker from the environment (DATABASE_URL, CELERY_BROKER_URL), queues of its own
(STORAGEOPS_QUEUE_PREFIX); the processes it starts are stopped by pid.

    python benchmarks/lasting_regression_beat.py [--quiet 6 --slowed 5 --back 3]

tests/campaigns/results/test_lasting_under_beat.py runs a short version (a 15-s interval) under the same beat.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import harness  # the environment's defaults, before Django's settings load

SIZE = 8 * 1024 * 1024
FILES = 12
RATE = 16_000_000  # bytes/s door2's throttle lets through when quiet
SLOWED_RATE = 4_000_000
SHARES = 16384  # the doors, this process and its children far above every other process


@dataclass
class Outcome:
    """What a scenario leaves for its caller to print or check."""

    runs: list[tuple[str, object]] = field(default_factory=list)  # (phase, Run)
    slowed_by: list = field(default_factory=list)  # the collector's events of the slowdown
    undone_by: list = field(default_factory=list)
    deliveries: list[tuple] = field(default_factory=list)
    mails: list[str] = field(default_factory=list)
    hooks: list[dict] = field(default_factory=list)
    again: dict = field(default_factory=dict)  # the first run back judged against the new normal

    def phase(self, name: str) -> list:
        return [run for phase, run in self.runs if phase == name]

    @property
    def quiet_median(self) -> float:
        return statistics.median(r.summary["total"]["throughput_bps"] for r in self.phase("quiet"))


def throughput(judgement: dict) -> dict | None:
    return next((f for f in judgement.get("figures") or [] if f["key"] == "throughput"), None)


def band_text(f: dict | None) -> str:
    if not f:
        return "–"
    return f"{f['low'] / 1e6:.2f}–{f['high'] / 1e6:.2f} (median {f['median'] / 1e6:.2f}, n {f['n']})"


def judgement_text(j: dict) -> str:
    if j.get("ongoing"):
        return f"{j['status']} (ongoing since #{j['ongoing']['since']}, {j['ongoing']['runs']} runs)"
    if j.get("recovered"):
        return f"{j['status']} (since #{j['recovered']['since']}, {j['recovered']['runs']} runs)"
    return j["status"]


def table(outcome: Outcome) -> str:
    """The per-run table: id, phase, figure, band, judgement, suspects (MB/s)."""
    rows = [
        "| run | phase | throughput MB/s | band MB/s | judgement | suspects |",
        "|---|---|---|---|---|---|",
    ]
    for phase, run in outcome.runs:
        j = run.summary.get("judgement") or {}
        suspects = ", ".join(f"#{s['event']} {s['kind']}" for s in j.get("suspects") or []) or "–"
        value = run.summary["total"]["throughput_bps"] / 1e6
        rows.append(
            f"| #{run.pk} | {phase} | {value:.2f} | {band_text(throughput(j))} | {judgement_text(j)} | {suspects} |"
        )
    return "\n".join(rows)


def alerts_text(outcome: Outcome) -> str:
    lines = [f"deliveries (run, kind, state): {outcome.deliveries}"]
    for number, mail in enumerate(outcome.mails, 1):
        subject = next((line for line in mail.splitlines() if line.startswith("Subject:")), "")
        lines += [f"mail {number}: {subject}", mail.split("\n\n", 1)[-1].strip(), ""]
    for number, hook in enumerate(outcome.hooks, 1):
        lines.append(f"webhook {number} ({hook['props']['kind']}): {hook['text'].splitlines()[0]}")
    return "\n".join(lines)


@contextmanager
def doors(base: Path) -> Iterator[tuple]:
    """door1 (the source) and door2 (throttled at RATE) on free loopback ports, and the test CA."""
    from devsite.xrootd_server import XRootDServer, make_test_ca, make_traversable, throttle_config

    ca_dir = base / "ca"
    ca_dir.mkdir()
    make_traversable(ca_dir)
    ca = make_test_ca(ca_dir)
    source = XRootDServer("door1", base / "s", workdir=base / "sr", https=ca)
    door = XRootDServer("door2", base / "d", workdir=base / "dr", https=ca, extra_config=throttle_config(RATE))
    try:
        yield source, door, ca
    finally:
        for server in (source, door):
            server.stop()


def wait(check: Callable, timeout: float, processes: tuple = (), what: str = "") -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        for p in processes:
            if p.returncode is not None:
                raise RuntimeError(f"{p.name} exited while waiting for {what}:\n{p.log_text()[-3000:]}")
        time.sleep(0.5)
    raise TimeoutError(f"{what} not seen in {timeout:.0f} s\n" + "\n".join(p.log_text()[-2000:] for p in processes))


def run_scenario(
    log_dir: Path,
    *,
    quiet: int,
    slowed: int,
    back: int,
    files: int = FILES,
    every_seconds: int | None = None,
    say: Callable[[str], None] = print,
) -> Outcome:
    """The whole story; ``every_seconds`` replaces the every-minute cron schedule by an interval
    that short (the test's: ten runs in about four minutes, not ten)."""
    import gfal2
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.utils import timezone
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    from alerts.models import AlertKind, Delivery, Subscription
    from campaigns.choices import ACTIVE_RUN_STATES, FINAL_RUN_STATES
    from campaigns.models import CampaignSchedule, Run
    from campaigns.results import baseline_choice
    from campaigns.runs import scheduling
    from collectors.models import Event, Host
    from devsite.xrootd_server import throttle_config
    from storageops import roles
    from tests.support.alert_servers import smtp_server, webhook_server
    from tests.support.cgroups import cpu_cgroup
    from tests.support.factories import campaign, endpoint
    from tests.support.processes import PYTHON, ROOT, ManagedProcess
    from tests.support.sparse import sparse_sources, tmpfs_dir
    from tests.support.workers import celery_beat, celery_worker, child_env

    tag = uuid.uuid4().hex[:6]
    outcome = Outcome()
    with ExitStack() as stack:
        mailbox = stack.enter_context(smtp_server())
        hook = stack.enter_context(webhook_server())
        base = stack.enter_context(tmpfs_dir("storageops-lasting-beat"))
        source_group = stack.enter_context(cpu_cgroup("door1", shares=SHARES))
        door_group = stack.enter_context(cpu_cgroup("door2", shares=SHARES))
        stack.enter_context(cpu_cgroup("harness", shares=SHARES)).add(os.getpid())  # the children inherit it
        source, door, ca = stack.enter_context(doors(base))
        for server, group in ((source, source_group), (door, door_group)):
            server.start()
            group.add(server.pid)
        sparse_sources(source, "lasting", files, SIZE)
        # Sources written long ago have their adler32 stored by the door: asked once here, or the
        # first night alone computes them and its outlier widens every band after it.
        ctx = gfal2.creat_context()
        for number in range(files):
            ctx.checksum(source.root_url_for(f"/data/lasting/{SIZE}/src-{number:07d}"), "adler32")

        host = Host.objects.create(
            name=f"door2-{tag}", sample_interval=1, watched_files=[str(door.config_path)],
            watched_services=[{"name": "xrootd-door2", "pidfile": str(door.xrootd_pidfile)}],
        )  # fmt: skip
        creds = {"bearer_token": "storageops-test", "ca_dir": str(ca.ca_dir)}
        dst = endpoint(f"door2-{tag}", door.davs_url_for("/data/"), backend_name=f"door2-{tag}", **creds)
        dst.hosts.set([host])
        src = endpoint(f"door1-{tag}", source.davs_url_for("/data/"), backend_name=f"door1-{tag}", **creds)
        watched = campaign(
            f"door1-to-door2-{tag}", [src], [dst], file_count=files, file_size=SIZE, source_path="lasting",
            tpc_mode="streamed", checksum_mode="both", concurrency_steps=[2], timeout=60,
        )  # fmt: skip
        watched.full_clean()
        Subscription.objects.create(
            name=f"storage team {tag}", campaign=watched, email="storage@site.example", webhook_url=hook.url,
            kinds=[AlertKind.REGRESSION],
        )  # fmt: skip
        schedule = scheduling.save_schedule(CampaignSchedule(campaign=watched, kind="cron", cron="* * * * *"))
        stack.callback(scheduling.delete_schedule, schedule)  # beat stops firing it, whatever happens
        if every_seconds:
            interval, _ = IntervalSchedule.objects.get_or_create(every=every_seconds, period=IntervalSchedule.SECONDS)
            task = PeriodicTask.objects.get(pk=schedule.periodic_task_id)
            task.crontab, task.interval = None, interval
            task.save()

        mail_env = {"STORAGEOPS_EMAIL_HOST": "127.0.0.1", "STORAGEOPS_EMAIL_PORT": str(mailbox.port),
                    "STORAGEOPS_BASE_URL": "https://storageops.site.example"}  # fmt: skip
        worker = celery_worker(log_dir, **mail_env)
        stack.callback(worker.stop)
        argv = [PYTHON, "manage.py", "collector", "--host", host.name, "--loglevel", "info"]
        collector = ManagedProcess(f"collector-{tag}", argv, child_env(), log_dir, cwd=ROOT).start()
        stack.callback(collector.stop)
        worker.wait_for_log("ready.", timeout=90)
        collector.wait_for_log("ready.", timeout=90)
        wait(lambda: Event.objects.filter(host=host).exists() or host_seen(host), 60, (collector,), "the collector")
        beat = celery_beat(log_dir, **mail_env)
        stack.callback(beat.stop)
        processes = (worker, collector, beat)
        say(f"worker pid {worker.pid}, collector pid {collector.pid}, beat pid {beat.pid}; "
            f"door1 {source.davs_url}, door2 {door.davs_url} (pid {door.pid})")  # fmt: skip

        seen: set[int] = set()

        def next_run(timeout: float = 240) -> Run:
            def ended() -> Run | None:
                for run in Run.objects.filter(campaign=watched).exclude(pk__in=seen).order_by("pk"):
                    return run if run.state in FINAL_RUN_STATES else None
                return None

            run = wait(ended, timeout, processes, "the next scheduled run's end")
            seen.add(run.pk)
            say(f"run #{run.pk} {run.state} {run.summary['total']['throughput_bps'] / 1e6:.2f} MB/s: "
                f"{judgement_text(run.summary.get('judgement') or {})}")  # fmt: skip
            return run

        def change_door(rate: int) -> list:
            """Restart door2 with another throttle, as an operator would; its collector logs it.

            A short interval leaves less time between runs than door2's restart takes (about
            11 s when it undoes the slow throttle): there, beat's task is held meanwhile, so no
            run starts on a door going down. Every minute leaves time enough, and nothing is held.
            """
            window[0] = timezone.now()
            if every_seconds:
                hold_beat(True)
                wait(lambda: not watched.runs.filter(state__in=ACTIVE_RUN_STATES).exists(), 120, processes,
                     "the run in flight to end")  # fmt: skip
            since = time.time()
            before = set(Event.objects.filter(host=host).values_list("pk", flat=True))
            door.extra_config = throttle_config(rate)
            door.restart()
            door_group.add(door.pid)

            def logged() -> list | None:
                events = list(Event.objects.filter(host=host, source="collector").exclude(pk__in=before))
                return events if {e.kind for e in events} >= {"service_restart", "config_change"} else None

            events = wait(logged, 30, processes, "the collector's events of the change")
            window[1] = max(e.time for e in events)
            if every_seconds:
                hold_beat(False)
            say(f"door2 throttled at {rate / 1e6:.0f} MB/s in {time.time() - since:.1f} s; collector logged "
                + "; ".join(f"#{e.pk} {e.kind}: {e.summary}" for e in events))  # fmt: skip
            return events

        def hold_beat(held: bool) -> None:
            task = PeriodicTask.objects.get(pk=schedule.periodic_task_id)
            task.enabled = not held
            task.save()  # its signal tells the running beat

        def record(phase: str, count: int, before: str = "") -> None:
            while len([p for p, _ in outcome.runs if p == phase]) < count:
                run = next_run()
                if before and run.finished_at and run.finished_at <= window[0]:
                    label = before  # ended before the change began: the phase before's
                elif before and run.started_at and run.started_at < window[1]:
                    label = "during change"  # began before the change was logged
                else:
                    label = phase
                outcome.runs.append((label, run))

        window = [None, None]  # the change's start and the time its collector logged it
        record("quiet", quiet)
        outcome.slowed_by = change_door(SLOWED_RATE)
        record("slowed", slowed, before="quiet")
        outcome.undone_by = change_door(RATE)
        record("undone", back, before="slowed")
        recovered = Delivery.objects.filter(campaign=watched, kind=AlertKind.RECOVERED)
        wait(recovered.exists, 60, processes, "the recovery alert")
        wait(lambda: len(mailbox.messages) >= 2 and len(hook.received) >= 2, 20, processes, "the mails and webhooks")
        time.sleep(2)  # anything sent late still counts

        outcome.deliveries = list(
            Delivery.objects.filter(campaign=watched).order_by("time").values_list("run_id", "kind", "state")
        )
        outcome.mails = [data for _, _, data in mailbox.messages]
        outcome.hooks = list(hook.received)

        # The slowed level accepted as the new normal from the first slowed run, by an operator:
        # the first run back at the old speed, judged again, is a change upward.
        # The table shows what each run was told when it ended; the judging again is told apart.
        outcome.runs = [(phase, Run.objects.get(pk=run.pk)) for phase, run in outcome.runs]
        first_slowed = outcome.phase("slowed")[0]
        first_back = outcome.phase("undone")[0]
        operator = get_user_model().objects.create_user(f"lasting-operator-{tag}")
        operator.groups.add(Group.objects.get(name=roles.OPERATOR))
        baseline_choice.accept_new_normal(first_slowed, "door2 stays throttled at 4 MB/s: its disks moved", operator)
        outcome.again = baseline_choice.judge_again(Run.objects.get(pk=first_back.pk), user=operator)
    return outcome


def host_seen(host) -> bool:
    host.refresh_from_db()
    return host.last_seen is not None


def report(outcome: Outcome) -> str:
    again = outcome.again
    f = throughput(again)
    return "\n".join(
        [
            table(outcome),
            "",
            f"quiet median {outcome.quiet_median / 1e6:.2f} MB/s (half: {outcome.quiet_median / 2e6:.2f})",
            "slowed by: " + "; ".join(f"#{e.pk} {e.kind} {e.time:%H:%M:%S}: {e.summary}" for e in outcome.slowed_by),
            "undone by: " + "; ".join(f"#{e.pk} {e.kind} {e.time:%H:%M:%S}: {e.summary}" for e in outcome.undone_by),
            "",
            alerts_text(outcome),
            "",
            f"accepted the new normal from #{outcome.phase('slowed')[0].pk}; #{outcome.phase('undone')[0].pk} judged "
            f"again: {again['status']}: {again['headline']}; band {band_text(f)}; baseline runs "
            f"{again.get('baseline_runs')}; earlier {again.get('earlier')}",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quiet", type=int, default=6, help="quiet runs (the first 3 have no baseline yet)")
    parser.add_argument("--slowed", type=int, default=5)
    parser.add_argument("--back", type=int, default=3, help="runs after the slowdown is undone")
    parser.add_argument("--files", type=int, default=FILES, help=f"files of {SIZE >> 20} MiB a run")
    parser.add_argument("--log-dir", type=Path, default=None)
    args = parser.parse_args()
    harness.setup()
    log_dir = args.log_dir or Path(f"/tmp/lasting-beat-{os.getpid()}")
    log_dir.mkdir(parents=True, exist_ok=True)
    print(harness.machine())
    print(f"logs in {log_dir}; database {os.environ['DATABASE_URL']}, broker {os.environ['CELERY_BROKER_URL']}")
    started = time.monotonic()
    outcome = run_scenario(log_dir, quiet=args.quiet, slowed=args.slowed, back=args.back, files=args.files)
    print(report(outcome))
    print(f"took {(time.monotonic() - started) / 60:.1f} min")


if __name__ == "__main__":
    main()

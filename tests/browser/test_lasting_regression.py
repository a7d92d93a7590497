"""A lasting slowdown end to end, on real parts (issue 34): a campaign's scheduled runs on a real
XRootD door, the door slowed for several runs through XRootD's own throttle (the door restarted
with a new config; its collector logs the restart and the config change), then the slowdown
undone. Every slowed run must stay regressed (the later
ones "ongoing since" the first, each naming the change), the first run back "recovered", the
later ones within a band that still holds the door's quiet level; the storage team told once at
the start and once at the recovery (a real SMTP server, a real HTTP server), the runs between
held back. Then the slowed level accepted as the new normal through the API: the first run back
at the old speed, judged again, is "improved".

As in test_regression_watch, the worker gets the very message beat sends for a due start
(campaigns.scheduled_start with its due time) as soon as the previous run ended: fourteen runs
of a one-minute schedule take five minutes, not fourteen. Small files (6 x 8 MiB, concurrency 2)
keep the slowed runs short. The quiet throttle (8 MB/s) is well under what the door and the worker
move on a loaded machine (15-19 MB/s at 16 MB/s, under two CPU hogs): the throttle, not the
machine's load, makes every night's figure, as it does the slowed nights' (4.06-4.14 MB/s).
"""

from __future__ import annotations

import os
import statistics

import gfal2
import pytest

from alerts.models import AlertKind, Delivery, Subscription
from campaigns.models import CampaignSchedule, Run
from campaigns.results import baseline_choice
from campaigns.runs import scheduling
from collectors.models import Event, Host
from collectors.sampling import HostCollector
from devsite.xrootd_server import XRootDServer, throttle_config
from tests.browser.test_regression_watch import SHARES, scheduled_run, wait_for
from tests.support.alert_servers import smtp_server, webhook_server
from tests.support.api import api
from tests.support.cgroups import cpu_cgroup
from tests.support.factories import campaign, endpoint
from tests.support.sparse import has_tmpfs, sparse_sources, tmpfs_dir
from tests.support.workers import celery_worker

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

SIZE = 8 * 1024 * 1024
FILES = 6
RATE = 8_000_000
SLOWED_RATE = 4_000_000
QUIET, SLOWED, BACK = 6, 5, 3  # six quiet nights, as test_regression_watch: fewer make bands wide


@pytest.fixture
def scratch():
    if not has_tmpfs():
        pytest.skip("needs a tmpfs at /dev/shm for the sparse files")
    with tmpfs_dir("storageops-lasting") as base:
        yield base


def throughput(run: Run) -> dict:
    return next(f for f in run.summary["judgement"]["figures"] if f["key"] == "throughput")


def table(runs: list[tuple[str, Run]]) -> str:
    """The per-run table docs/verdicts.md shows: id, phase, figure, band, judgement, suspects."""
    rows = []
    for phase, run in runs:
        j = run.summary["judgement"]
        f = next((f for f in j.get("figures") or [] if f["key"] == "throughput"), None)
        band = f"{f['low'] / 1e6:.2f}–{f['high'] / 1e6:.2f} (median {f['median'] / 1e6:.2f}, n {f['n']})" if f else "–"
        status = j["status"] + (f" (ongoing since #{j['ongoing']['since']})" if j.get("ongoing") else "")
        suspects = ", ".join(f"#{s['event']} {s['kind']}" for s in j.get("suspects") or []) or "–"
        value = run.summary["total"]["throughput_bps"] / 1e6
        rows.append(f"| {run.pk} | {phase} | {value:.2f} | {band} | {status} | {suspects} |")
    return "\n".join(rows)


def test_a_lasting_slowdown_is_regressed_on_every_run_then_recovered_and_a_new_normal_accepted(
    scratch, log_dir, test_ca, operator
):
    source = XRootDServer("last-src", scratch / "s", workdir=scratch / "sr", https=test_ca)
    door = XRootDServer(
        "last-dst", scratch / "d", workdir=scratch / "dr", https=test_ca, extra_config=throttle_config(RATE)
    )
    creds = {"bearer_token": "storageops-test", "ca_dir": str(test_ca.ca_dir)}
    with (
        smtp_server() as mailbox,
        webhook_server() as hook,
        cpu_cgroup("source", shares=SHARES) as source_group,
        cpu_cgroup("watched", shares=SHARES) as door_group,
        cpu_cgroup("harness", shares=SHARES) as harness,
    ):
        harness.add(os.getpid())
        worker = None
        try:
            for server, group in ((source, source_group), (door, door_group)):
                server.start()
                group.add(server.pid)
            sparse_sources(source, "lasting", FILES, SIZE)
            # As in test_regression_watch: the source's checksums asked once here, so the first
            # night does not compute them alone and widen every band after it.
            ctx = gfal2.creat_context()
            for number in range(FILES):
                ctx.checksum(source.root_url_for(f"/data/lasting/{SIZE}/src-{number:07d}"), "adler32")
            # door2's own collector (in this process: one tick a phase) watches its config file and
            # its xrootd, and logs the throttle's restarts as an operator would find them.
            host = Host.objects.create(
                name="door2", sample_interval=1, watched_files=[str(door.config_path)],
                watched_services=[{"name": "xrootd-door2", "pidfile": str(door.xrootd_pidfile)}],
            )  # fmt: skip
            collector = HostCollector(host)
            collector.tick()
            dst = endpoint("door2", door.davs_url_for("/data/"), **creds)
            dst.hosts.set([host])
            watched = campaign(
                "door1-to-door2", [endpoint("door1", source.davs_url_for("/data/"), **creds)], [dst],
                file_count=FILES, file_size=SIZE, source_path="lasting", tpc_mode="streamed",
                checksum_mode="both", concurrency_steps=[2], timeout=60,
            )  # fmt: skip
            watched.full_clean()
            schedule = scheduling.save_schedule(CampaignSchedule(campaign=watched, kind="interval", interval_minutes=1))
            Subscription.objects.create(
                name="storage team", campaign=watched, email="storage@site.example", webhook_url=hook.url,
                kinds=[AlertKind.REGRESSION],
            )  # fmt: skip
            worker = celery_worker(
                log_dir, STORAGEOPS_EMAIL_HOST="127.0.0.1", STORAGEOPS_EMAIL_PORT=str(mailbox.port),
                STORAGEOPS_BASE_URL="https://storageops.site.example",
            )  # fmt: skip
            worker.wait_for_log("ready.", timeout=60)

            quiet = [scheduled_run(schedule, worker) for _ in range(QUIET)]
            door.extra_config = throttle_config(SLOWED_RATE)
            door.restart()
            door_group.add(door.pid)
            collector.tick()
            logged = list(Event.objects.filter(host=host, source="collector").order_by("-time", "-pk"))
            slowed = [scheduled_run(schedule, worker) for _ in range(SLOWED)]
            door.extra_config = throttle_config(RATE)
            door.restart()
            door_group.add(door.pid)
            collector.tick()
            undone = set(Event.objects.filter(host=host, source="collector").values_list("pk", flat=True))
            back = [scheduled_run(schedule, worker) for _ in range(BACK)]
            wait_for(lambda: Delivery.objects.filter(kind=AlertKind.RECOVERED).exists())
            wait_for(lambda: len(mailbox.messages) >= 2 and len(hook.received) >= 2, timeout=10)
        finally:
            if worker is not None:
                worker.stop()
            for server in (source, door):
                server.stop()

    print("logged by the collector:", [(e.pk, e.kind, e.summary) for e in logged])
    assert {e.kind for e in logged} == {"service_restart", "config_change"}, logged
    assert len(undone) == 2 * len(logged)
    report = table([*(("quiet", r) for r in quiet), *(("slowed", r) for r in slowed), *(("undone", r) for r in back)])
    print(report)
    everything = [*quiet, *slowed, *back]
    assert all(r.trigger == "schedule" and r.state == "succeeded" for r in everything), report
    quiet_median = statistics.median(r.summary["total"]["throughput_bps"] for r in quiet)

    assert [r.summary["judgement"]["status"] for r in quiet] == ["no_baseline"] * 3 + ["within"] * (QUIET - 3), report
    # A quiet night the machine's load held well below the others' tight level is kept out of
    # later baselines by the watch's "far" rule (7.79 MB/s against a median of 9.20 of three
    # runs, once in CI with six test processes): the baseline is the quiet nights counted.
    counted = [r.pk for r in reversed(quiet) if baseline_choice.standing(r)["counted"]]
    assert len(counted) >= QUIET - 1, report
    # Every slowed run regressed against the quiet runs only, each naming the change.
    first = slowed[0]
    for i, run in enumerate(slowed):
        j = run.summary["judgement"]
        assert j["status"] == "regressed" and throughput(run)["status"] == "regressed", report
        assert j["baseline_runs"] == counted, report
        assert [s["event"] for s in j["suspects"]] == [e.pk for e in logged], report
        assert j.get("ongoing") == (None if i == 0 else {"since": first.pk, "runs": i + 1}), report
        assert throughput(run)["low"] > quiet_median / 2, report
    assert f"(ongoing since run #{first.pk}, {SLOWED} runs)" in slowed[-1].summary["judgement"]["headline"]
    # The first run back at the quiet level recovered; the later ones within a band that still
    # holds it. A run back that the machine's load held below the band (once 7.68 MB/s against a
    # low of 7.85, in CI with six test processes) is judged as what it measured: the regression
    # goes on through it, its alert held back like the other ongoing ones.
    still_low = []
    for run in back[:-1]:
        if throughput(run)["status"] != "regressed":
            break
        still_low.append(run)
    home = back[len(still_low)]
    lasted = SLOWED + len(still_low)
    for i, run in enumerate(still_low):
        j = run.summary["judgement"]
        assert j["status"] == "regressed" and j.get("ongoing") == {"since": first.pk, "runs": SLOWED + i + 1}, report
    assert home.summary["judgement"]["status"] == "recovered", report
    assert home.summary["judgement"]["recovered"] == {"since": first.pk, "runs": lasted}
    for run in back[len(still_low) + 1 :]:
        assert run.summary["judgement"]["status"] == "within", report
        assert throughput(run)["low"] > quiet_median / 2, report
    assert not [s for r in back[len(still_low) :] for s in r.summary["judgement"]["suspects"]]

    # Alerts: the start and the recovery sent, the ongoing runs between held back.
    deliveries = list(Delivery.objects.order_by("time").values_list("run_id", "kind", "state"))
    assert deliveries == [
        (first.pk, "regression", "sent"),
        *((r.pk, "regression", "suppressed") for r in [*slowed[1:], *still_low]),
        (home.pk, "recovered", "sent"),
    ], deliveries
    [(_, _, start), (_, _, recovered)] = mailbox.messages
    band = throughput(first)
    assert f"Subject: [StorageOps] {first} regressed" in start
    assert "throughput: " in start and " (median " in start and f" of {len(counted)} runs): regressed" in start
    for event in logged:
        assert f"{event.time:%Y-%m-%d %H:%M} UTC {event.kind} on door2: {event.summary}" in start
    assert f"https://storageops.site.example/campaigns/runs/{first.pk}/" in start
    assert f"Subject: [StorageOps] {home} recovered" in recovered
    assert f"Recovered: the regression since run #{first.pk} lasted {lasted} runs." in recovered
    assert [p["props"]["kind"] for p in hook.received] == ["regression", "recovered"]

    # The slowed level accepted as the new normal from its first run, through the API: the first
    # run back at the old speed, judged again, is improved against it, its earlier verdict kept.
    client = api(operator, "operator")
    accepted = client.post(f"/api/v1/runs/{first.pk}/baseline/",
                           {"choice": "accepted", "reason": "door2 stays throttled: its disks moved"},
                           format="json")  # fmt: skip
    assert accepted.status_code == 200, accepted.content
    again = client.post(f"/api/v1/runs/{home.pk}/judge-again/", format="json").json()["judgement"]
    assert again["normal_from"] == first.pk
    # The new normal's baseline: the slowed runs (and any run back the load held at their level).
    assert {r.pk for r in slowed} <= set(again["baseline_runs"]) <= {r.pk for r in [*slowed, *still_low]}, again
    assert again["status"] == "improved" and again["headline"].startswith("Throughput improved"), again
    assert again["earlier"] == [{"status": "recovered", "headline": home.summary["judgement"]["headline"]}]
    new_band = next(f for f in again["figures"] if f["key"] == "throughput")
    print(
        f"judged again against the new normal: {again['headline']} band {new_band['low'] / 1e6:.2f}–"
        f"{new_band['high'] / 1e6:.2f} MB/s (median {new_band['median'] / 1e6:.2f}, n {new_band['n']})"
    )
    print(f"quiet median {quiet_median / 1e6:.2f} MB/s; deliveries {deliveries}")
    print("mail 1:\n" + start.split("\n\n", 1)[1] + "\nmail 2:\n" + recovered.split("\n\n", 1)[1])
    assert band["low"] > quiet_median / 2

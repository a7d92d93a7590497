"""The regression watch on a noisy site, on real doors (issue 49): quiet nights that spread ±25 %
(the watched door held to other rates on some of them, as a site's nights differ), then nights
slowed by 80 % or more, then the slowdown undone. Every slowed night must be regressed with the
change as its suspect, none may join the baseline, the first night back "recovered", the later
ones within; with five quiet nights and with three only.

The door's rate is XRootD's own throttle (the door restarted with a new config, each change
logged by its collector as a site's would be): a rate the machine's load does not move, so each
night's figure is the one the scenario asks for. As in test_lasting_regression, the worker gets
beat's very message for a due start as soon as the previous run ended.
"""

from __future__ import annotations

import os
import statistics

import gfal2
import pytest

from campaigns.models import CampaignSchedule, Run
from campaigns.results import baseline_choice
from campaigns.runs import scheduling
from collectors.models import Event, Host
from collectors.sampling import HostCollector
from devsite.xrootd_server import XRootDServer, throttle_config
from tests.browser.test_dashboard_browser import SCREENSHOTS, log_in
from tests.browser.test_regression_watch import SHARES, scheduled_run
from tests.support.cgroups import cpu_cgroup
from tests.support.factories import campaign, endpoint
from tests.support.sparse import has_tmpfs, sparse_sources, tmpfs_dir
from tests.support.workers import celery_worker

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

SIZE = 4 * 1024 * 1024
FILES = 8
MB = 1_000_000
# The quiet nights' rates: a median of 8 MB/s, nights about 25 % under and over it. The slow
# night is asked 5.5 MB/s: the throttle lets a short night through faster than asked (6 MB/s
# ran at 7.3 in CI, leaving a spread of 14 %, less than the scenario needs).
QUIET_FIVE = [8 * MB, 5_500_000, 8 * MB, 10 * MB, 8 * MB]
QUIET_THREE = [8 * MB, 5_500_000, 10 * MB]
SLOWED_RATE = 1_500_000  # -81 % against the quiet median
# Three slowed nights: the first regressed on its own, the next two as an ongoing regression.
SLOWED, BACK = 3, 3


@pytest.fixture
def scratch():
    if not has_tmpfs():
        pytest.skip("needs a tmpfs at /dev/shm for the sparse files")
    with tmpfs_dir("storageops-noisy") as base:
        yield base


def throughput(run: Run) -> dict | None:
    return next((f for f in run.summary["judgement"].get("figures") or [] if f["key"] == "throughput"), None)


def table(runs: list[tuple[str, Run]]) -> str:
    """run, phase, throughput, band, judgement, in baseline (and why), suspect: the issue's table."""
    rows = [
        "| run | phase | MB/s | band (MB/s) | judgement | in later baselines | suspect |",
        "|---|---|---|---|---|---|---|",
    ]
    for phase, run in runs:
        run.refresh_from_db()
        j = run.summary["judgement"]
        f = throughput(run)
        band = f"{f['low'] / MB:.2f}–{f['high'] / MB:.2f} (median {f['median'] / MB:.2f}, n {f['n']})" if f else "–"
        status = j["status"] + (f" (ongoing since #{j['ongoing']['since']})" if j.get("ongoing") else "")
        standing = baseline_choice.standing(run)
        counted = ("yes" if standing["counted"] else "no") + f": {standing['why']}"
        suspects = ", ".join(f"#{s['event']} {s['kind']}" for s in j.get("suspects") or []) or "–"
        value = run.summary["total"]["throughput_bps"] / MB
        rows.append(f"| #{run.pk} | {phase} | {value:.2f} | {band} | {status} | {counted} | {suspects} |")
    return "\n".join(rows)


class Site:
    """The watched door (door2) behind its throttle, its collector, and the nightly schedules."""

    def __init__(self, door: XRootDServer, group, collector: HostCollector, host: Host, worker) -> None:
        self.door, self.group, self.collector, self.host, self.worker = door, group, collector, host, worker
        self.rate = None

    def hold_to(self, rate: int) -> list[Event]:
        """Restart door2 with another throttle; its collector logs the change. Returns what it logged."""
        if rate == self.rate:
            return []
        before = set(Event.objects.filter(host=self.host).values_list("pk", flat=True))
        self.door.extra_config = throttle_config(rate)
        self.door.restart()
        self.group.add(self.door.pid)
        self.collector.tick()
        self.rate = rate
        return list(Event.objects.filter(host=self.host).exclude(pk__in=before).order_by("-time", "-pk"))

    def night(self, schedule: CampaignSchedule, rate: int) -> tuple[Run, list[Event]]:
        logged = self.hold_to(rate)
        return scheduled_run(schedule, self.worker), logged


def scenario(site: Site, schedule: CampaignSchedule, quiet_rates: list[int]) -> dict:
    quiet = [site.night(schedule, rate)[0] for rate in quiet_rates]
    slowed, change = [], []
    for _ in range(SLOWED):
        run, logged = site.night(schedule, SLOWED_RATE)
        slowed.append(run)
        change = change or logged
    back = [site.night(schedule, statistics.median(quiet_rates))[0] for _ in range(BACK)]
    return {"quiet": quiet, "slowed": slowed, "back": back, "change": change}


def check(found: dict, n_quiet: int) -> str:
    quiet, slowed, back, change = found["quiet"], found["slowed"], found["back"], found["change"]
    report = table([*(("quiet", r) for r in quiet), *(("slowed", r) for r in slowed), *(("undone", r) for r in back)])
    print(report)
    everything = [*quiet, *slowed, *back]
    assert all(r.state == "succeeded" and not r.disturbed for r in everything), report
    values = [r.summary["total"]["throughput_bps"] for r in quiet]
    median = statistics.median(values)
    spread = max(abs(v - median) / median for v in values)
    # Their rates are ±25 %; each night's own overheads and the machine's load move them further
    # either way (a night asked 10 MB/s ran at 12.0 once in CI: a spread of 47 %). Wider only
    # makes the watch's task harder: the floor is what the scenario needs.
    assert 0.15 < spread < 0.6, f"the quiet nights spread {spread:.0%}, not about ±25 %\n{report}"
    assert {e.kind for e in change} == {"service_restart", "config_change"}, change
    for i, run in enumerate(slowed):
        j = run.summary["judgement"]
        # The cause put there held it: the door's throttle, and the night well below the quiet
        # ones (their rates are what a busy machine let them reach: 4.4-7.3 MB/s of 8 asked, once).
        assert run.summary["total"]["throughput_bps"] < min(1.1 * SLOWED_RATE, 0.5 * median), report
        assert j["status"] == "regressed" and throughput(run)["status"] == "regressed", report
        assert j["baseline_runs"] == [r.pk for r in reversed(quiet) if r.summary["judgement"]["status"] != "regressed"]
        assert len(j["baseline_runs"]) == n_quiet, report
        assert [s["event"] for s in j["suspects"]] == [e.pk for e in change], report
        assert (j.get("ongoing") or {}).get("since") == (None if i == 0 else slowed[0].pk), report
        assert baseline_choice.standing(run)["counted"] is False
    assert [r.summary["judgement"]["status"] for r in back] == ["recovered"] + ["within"] * (BACK - 1), report
    assert all(baseline_choice.standing(r)["counted"] for r in back), report
    return report


def test_a_noisy_sites_slowed_nights_are_each_regressed_and_never_join_the_baseline(
    scratch, log_dir, test_ca, page, live_server, viewer
):
    source = XRootDServer("noisy-src", scratch / "s", workdir=scratch / "sr", https=test_ca)
    door = XRootDServer(
        "noisy-dst", scratch / "d", workdir=scratch / "dr", https=test_ca, extra_config=throttle_config(8 * MB)
    )
    creds = {"bearer_token": "storageops-test", "ca_dir": str(test_ca.ca_dir)}
    with (
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
            sparse_sources(source, "noisy", FILES, SIZE)
            ctx = gfal2.creat_context()  # the source's checksums asked once, not by the first night alone
            for number in range(FILES):
                ctx.checksum(source.root_url_for(f"/data/noisy/{SIZE}/src-{number:07d}"), "adler32")
            host = Host.objects.create(
                name="door2", sample_interval=1, watched_files=[str(door.config_path)],
                watched_services=[{"name": "xrootd-door2", "pidfile": str(door.xrootd_pidfile)}],
            )  # fmt: skip
            collector = HostCollector(host)
            collector.tick()
            src = endpoint("door1", source.davs_url_for("/data/"), **creds)
            dst = endpoint("door2", door.davs_url_for("/data/"), **creds)
            dst.hosts.set([host])
            worker = celery_worker(log_dir)
            worker.wait_for_log("ready.", timeout=60)
            site = Site(door, door_group, collector, host, worker)
            site.rate = 8 * MB
            found = {}
            for name, rates in (("five-quiet-nights", QUIET_FIVE), ("three-quiet-nights", QUIET_THREE)):
                watched = campaign(
                    name, [src], [dst], file_count=FILES, file_size=SIZE, source_path="noisy", tpc_mode="streamed",
                    checksum_mode="both", concurrency_steps=[2], timeout=120,
                )  # fmt: skip
                schedule = scheduling.save_schedule(
                    CampaignSchedule(campaign=watched, kind="interval", interval_minutes=1)
                )
                found[name] = (watched, scenario(site, schedule, rates))
        finally:
            if worker is not None:
                worker.stop()
            for server in (source, door):
                server.stop()

    five, three = found["five-quiet-nights"], found["three-quiet-nights"]
    print("five quiet nights:")
    check(five[1], n_quiet=5)
    print("three quiet nights:")
    check(three[1], n_quiet=3)

    # The campaign page says it: each run against its band, in or out of the baselines and why.
    log_in(page, live_server, viewer.username)
    page.goto(f"{live_server.url}{five[0].get_absolute_url()}")
    page.wait_for_function("() => { const c = document.querySelector('[data-chart=history]'); return c && c._chart; }")
    rows = page.locator("#history-table tbody tr")
    assert rows.count() == len(QUIET_FIVE) + SLOWED + BACK
    for run in five[1]["slowed"]:
        row = page.locator(f"#history-table tr[data-run='{run.pk}']")
        assert row.locator("[data-judged]").get_attribute("data-judged") == "regressed"
        assert row.locator("[data-counted]").inner_text().startswith("no: it was judged regressed")
        assert "config change on door2" in row.inner_text() or "service restart on door2" in row.inner_text()
    page.locator("#history").scroll_into_view_if_needed()
    page.screenshot(path=str(SCREENSHOTS / "noisy-watch-campaign.png"), full_page=True)
    assert page.js_errors == []

"""`make run` outlives a door: a demo door SIGKILLed mid-run is restarted within seconds, its
collector logs the restart on the Events page as a real restart would be, and the run that was
copying into it ends (never stuck); two sites on one machine are stopped one after the other,
each leaving the other running.

runsite runs here on the test database (no launcher), so the test reads the Event and Run rows
its children write, and the Events page through Django's client."""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path

import pytest
from django.urls import reverse

from campaigns.choices import RunState
from campaigns.models import Run
from collectors.models import Event, MetricSample
from devsite.processes import descendants, is_alive, start_time
from devsite.xrootd_server import xroot_ping
from tests.support.ports import free_port
from tests.support.processes import PYTHON, ROOT, ManagedProcess
from tests.support.site import status, wait_until_up
from tests.support.workers import child_env

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

#: A run of the demo sweep takes about a minute; one that a dead door held up must still end.
RUN_END_WITHIN = 240


def _site(tmp_path: Path, var: Path, name: str, *options: str) -> tuple[ManagedProcess, int]:
    port = free_port()
    argv = [PYTHON, "manage.py", "runsite", "--bind", f"127.0.0.1:{port}", *options]
    site = ManagedProcess(name, argv, child_env(STORAGEOPS_VAR_DIR=str(var)), tmp_path, cwd=ROOT).start()
    return wait_until_up(site, port), port


def _wait(condition, seconds: float, what: str, site: ManagedProcess) -> float:
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < seconds, f"{what}: not within {seconds} s\n{site.log_text()[-3000:]}"
        time.sleep(0.1)
    return time.monotonic() - started


def _stop(site: ManagedProcess) -> None:
    if site.returncode is None:
        os.kill(site.pid, signal.SIGINT)  # what Ctrl-C does
        site.proc.wait(timeout=60)
    site.stop()


def test_a_killed_demo_door_comes_back_its_restart_is_logged_and_the_run_ends(tmp_path, var_dir, admin_user, client):
    site, _ = _site(tmp_path, var_dir, "runsite")
    try:
        door_port = int(re.search(r"demo door door2: root://127\.0\.0\.1:(\d+)/", site.log_text()).group(1))
        run = Run.objects.get(campaign__name="demo-sweep")
        _wait(lambda: Run.objects.get(pk=run.pk).files_done >= 3, 120, "the demo run copies", site)
        # The collector has seen door2's daemon once, so that what follows is a change to it.
        seen = MetricSample.objects.filter(host__name="door2", metric="proc.start_time")
        _wait(seen.exists, 30, "door2's collector samples", site)
        old = json.loads((var_dir / "run" / "door2.pid").read_text())["pid"]
        # runsite's other children (web, the two workers, beat, door1, the collectors, the pool clients).
        records = [json.loads(path.read_text()) for path in (var_dir / "run").glob("*.pid")]
        others = {r["pid"]: r["started"] for r in records if r["name"] not in ("door2", "runsite")}
        assert len(others) == 9, records
        before = set(Event.objects.values_list("pk", flat=True))

        killed = time.monotonic()
        os.kill(old, signal.SIGKILL)
        answering = _wait(lambda: xroot_ping(door_port, timeout=1.0), 30, "door2 answers again", site)
        restarts = Event.objects.filter(host__name="door2", kind="service_restart", source="collector")
        _wait(lambda: restarts.exclude(pk__in=before).exists(), 30, "the collector logs the restart", site)
        logged = time.monotonic() - killed
        # runsite records the new pid once the door's start has returned (it answers, then its
        # start checks the rest); the collector may see the new daemon before that.
        _wait(lambda: "door2 restarted (pid " in site.log_text(), 30, "runsite records door2's new pid", site)

        new = json.loads((var_dir / "run" / "door2.pid").read_text())["pid"]
        assert new != old
        log = site.log_text()
        assert f"door2 (pid {old}) exited (killed by SIGKILL) after " in log, log[-3000:]
        assert f"door2 restarted (pid {new}, restart 1)." in log, log[-3000:]
        assert "stopping everything" not in log
        # Every other child carries on: the same processes as before the kill.
        assert [pid for pid, started in others.items() if not is_alive(pid, started)] == []
        # While the run is live the collector samples every second: it may see the door gone
        # ("xrootd stopped (was pid N)") a tick before it sees the new daemon.
        with_new = lambda: [e for e in restarts.exclude(pk__in=before) if str(new) in e.summary + e.detail]  # noqa: E731
        _wait(with_new, 30, "the collector logs the new daemon", site)
        event = with_new()[-1]
        assert event.summary.startswith("xrootd "), event.summary
        client.force_login(admin_user)
        page = client.get(reverse("collectors:event_list"), {"host": event.host_id})
        assert page.status_code == 200
        assert event.summary in page.content.decode()

        active = (RunState.PENDING, RunState.RUNNING, RunState.CANCELLING)
        ended = _wait(lambda: Run.objects.get(pk=run.pk).state not in active, RUN_END_WITHIN, "the run ends", site)
        run.refresh_from_db()
        assert run.state in (RunState.SUCCEEDED, RunState.PARTIAL), (run.state, run.error)
        print(
            f"\ndemo door2 SIGKILLed: answering again after {answering:.1f} s, restart event recorded after "
            f"{logged:.1f} s ({event.summary!r}); the run ended {run.state} ({run.files_done} of "
            f"{run.planned_files} copied, {run.files_failed} failed) {ended:.0f} s after the restart"
        )
    finally:
        _stop(site)
    assert site.proc.returncode == 0, site.log_text()[-3000:]
    assert not xroot_ping(door_port, timeout=1.0), "the restarted door stops with the site"


def _stop_one_keeping_the_other(stopped: ManagedProcess, kept: ManagedProcess, kept_port: int, kept_var: Path):
    tree = {pid: start_time(pid) for pid in descendants(kept.pid)}
    _stop(stopped)
    assert stopped.proc.returncode == 0, stopped.log_text()[-3000:]
    # The one left: every process as it was, answering, its control socket in place.
    assert [pid for pid, started in tree.items() if not is_alive(pid, started)] == []
    assert status(kept_port) == 200
    assert (kept_var / "run" / "gunicorn.ctl").is_socket(), "gunicorn's control socket is each site's own"


def test_two_sites_on_one_machine_stop_one_after_the_other_leaving_the_other_running(tmp_path, var_dir):
    var_a, var_b = var_dir.parent / "var-a", var_dir.parent / "var-b"
    sites = []
    try:
        a, port_a = _site(tmp_path, var_a, "runsite-a", "--no-demo")
        sites.append(a)
        b, port_b = _site(tmp_path, var_b, "runsite-b", "--no-demo")
        sites.append(b)
        _stop_one_keeping_the_other(b, a, port_a, var_a)
        # And the other way round: b back, a stopped this time.
        b, port_b = _site(tmp_path, var_b, "runsite-b2", "--no-demo")
        sites.append(b)
        _stop_one_keeping_the_other(a, b, port_b, var_b)
    finally:
        for site in sites:
            _stop(site)

"""`make run`'s command: its own PostgreSQL and Redis, web, worker, beat, two real XRootD doors and
two pool clients, up within 60 s, a demo run going, a pooled run started from the web UI copied by
both clients; then SIGTERM to the launcher (what a service manager sends) leaves no process of its
tree behind, the servers stopped last, and the next start on the same port, stopped by SIGHUP (a
closed terminal), finds nothing to clean up."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import urllib.parse
import urllib.request
from http.cookiejar import CookieJar

import pytest

from devsite.xrootd_server import xroot_ping
from tests.support.ports import free_port
from tests.support.site import DEMO, TREE_SIZE, start, stop_and_check
from tests.support.site import status as healthz_status

pytestmark = pytest.mark.slow


def _get(url: str, opener=None) -> tuple[int, str]:
    try:
        with (opener or urllib.request.urlopen)(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


def _post(opener, base: str, path: str, jar: CookieJar, **fields: str):
    csrf = next(c.value for c in jar if c.name == "csrftoken")
    data = urllib.parse.urlencode({**fields, "csrfmiddlewaretoken": csrf}).encode()
    request = urllib.request.Request(f"{base}{path}", data=data, headers={"Referer": f"{base}{path}"})
    return opener.open(request, timeout=30)


def test_runsite_serves_the_dashboard_real_doors_and_a_pool_then_stops(tmp_path, var_dir):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    servers: dict[str, int] = {}
    started = time.monotonic()
    site = start(tmp_path, var_dir, port, "runsite")
    try:
        # How fast it comes up is a benchmark's figure, not this test's (start() gives up at 90 s).
        up = time.monotonic() - started
        status, body = _get(f"{base}/healthz")
        assert status == 200, (f"up after {up:.0f} s", site.log_text()[-3000:])
        assert '"transport": "redis"' in body, body
        servers = {p.stem: json.loads(p.read_text())["pid"] for p in (var_dir / "run" / "site").glob("*.pid")}
        assert set(servers) == {"launcher", "postgres", "redis"}, servers
        assert (var_dir / "run" / "gunicorn.ctl").exists(), "gunicorn's control socket is the site's own"
        assert _get(f"{base}/login/")[0] == 200

        # Each web process gunicorn booted imports its views and freezes its start-up heap before
        # it serves (the one that answered above did; the others may still be loading).
        deadline = time.monotonic() + 60
        while True:
            log = site.log_text()
            booted = len(re.findall(r"Booting worker with pid: \d+", log))
            warmed = [int(n) for n in re.findall(r"warmed: (\d+) start-up objects frozen", log)]
            if booted and len(warmed) == booted:
                break
            assert time.monotonic() < deadline, (booted, warmed, log[-3000:])
            time.sleep(0.2)
        assert min(warmed) > 50_000, warmed
        doors = re.findall(r"demo door (door\d): root://127\.0\.0\.1:(\d+)//data/demo", log)
        assert [d[0] for d in doors] == ["door1", "door2"], log[-3000:]
        for _, door_port in doors:
            query = ["xrdfs", f"127.0.0.1:{door_port}", "query", "config", "version"]
            ping = subprocess.run(query, capture_output=True, text=True, timeout=20)
            assert ping.returncode == 0 and ping.stdout.startswith("v5"), ping.stderr
            stat = subprocess.run(["xrdfs", f"127.0.0.1:{door_port}", "stat", "/data"], capture_output=True,
                                  text=True, timeout=20)  # fmt: skip
            assert stat.returncode == 0 and "IsDir" in stat.stdout, stat.stdout + stat.stderr
        password = re.search(r"log in as admin / (\S+)\)", log).group(1)

        # The demo run is picked up by the worker and moves.
        jar = CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        _get(f"{base}/login/", opener.open)
        with _post(opener, base, "/login/", jar, username="admin", password=password) as response:
            assert response.status == 200
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            status, page = _get(f"{base}/campaigns/runs/", opener.open)
            assert status == 200
            if "demo-sweep #1" in page and ("state-running" in page or "state-succeeded" in page):
                break
            time.sleep(1)
        else:
            raise AssertionError(page[-2000:] + site.log_text()[-3000:])

        # Each demo door has its collector: the hosts page hears from both.
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            status, hosts = _get(f"{base}/hosts/", opener.open)
            assert status == 200
            if all(re.search(rf">{door}</a></td>[^\n]*\n\s*<td>seen ", hosts) for door in ("door1", "door2")):
                break
            time.sleep(1)
        else:
            raise AssertionError(hosts[-2000:] + site.log_text()[-3000:])

        # The demo pool, started from its campaign's page as a newcomer would: both clients copy.
        status, campaigns = _get(f"{base}/campaigns/", opener.open)
        pool = re.search(r'href="/campaigns/(\d+)/"[^>]*>\s*demo-pool\s*<', campaigns)
        assert status == 200 and pool, campaigns[-2000:]
        with _post(opener, base, f"/campaigns/{pool.group(1)}/start/", jar) as response:
            run_id = re.search(r"/campaigns/runs/(\d+)/$", response.url).group(1)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            status, text = _get(f"{base}/api/v1/runs/{run_id}/", opener.open)
            run = json.loads(text)
            if run["state"] not in ("pending", "running", "stopping"):
                break
            time.sleep(1)
        assert run["state"] == "succeeded" and run["files_done"] == 16, (run, site.log_text()[-3000:])
        clients = run["summary"]["clients"]
        assert set(clients) == {"demo-client1", "demo-client2"}, clients
        assert all(figures["files_ok"] > 0 for figures in clients.values()), clients
        assert sum(figures["files_ok"] for figures in clients.values()) == 16
        stop_and_check(site, signal.SIGTERM, TREE_SIZE + DEMO)
    finally:
        site.stop()
    log = site.log_text()
    assert site.proc.returncode == 0, log[-3000:]
    assert "Stopping (SIGTERM)" in log, log[-3000:]
    children = [int(pid) for pid in re.findall(r"started [\w-]+ \(pid (\d+)\)", log)]
    assert len(children) == 8  # web, the two workers, beat, a collector per door, two pool clients
    assert not [pid for pid in children if os.path.exists(f"/proc/{pid}")]
    # PostgreSQL and Redis stop last, once runsite has stopped its children.
    assert log.index("Stopped in") < log.index("Stopped the own PostgreSQL/Redis"), log[-3000:]
    assert not [pid for pid in servers.values() if os.path.exists(f"/proc/{pid}")], servers
    assert not list((var_dir / "run" / "site").glob("*.pid"))
    assert healthz_status(port) == 0, "the web server must be gone"
    for _, door_port in doors:
        assert not xroot_ping(int(door_port), timeout=2.0), "the doors must be gone"

    # The same port and var directory after a clean stop: nothing to clean up; no demo this time,
    # which saves the doors' start.
    again = start(tmp_path, var_dir, port, "runsite-2", "--no-demo")
    try:
        log = again.log_text()
        assert "An earlier runsite" not in log, log[-3000:]
        assert "An earlier launcher" not in log, log[-3000:]
        stop_and_check(again, signal.SIGHUP, TREE_SIZE)
    finally:
        again.stop()
    assert again.proc.returncode == 0, again.log_text()[-3000:]
    assert "Stopping (SIGHUP)" in again.log_text()
    assert "Stopped the own PostgreSQL/Redis" in again.log_text()

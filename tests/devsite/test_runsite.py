"""`make run`'s command: web, worker, beat and two real XRootD doors, up within 60 s on the
embedded defaults, a demo run going, and everything stopped by Ctrl-C."""

from __future__ import annotations

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
from tests.support.processes import PYTHON, ROOT, ManagedProcess

pytestmark = pytest.mark.slow


def _get(url: str, opener=None) -> tuple[int, str]:
    try:
        with (opener or urllib.request.urlopen)(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


def test_runsite_serves_the_dashboard_and_real_doors_then_stops(tmp_path):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env.update({"STORAGEOPS_VAR_DIR": str(tmp_path / "var"), "GFAL_PYTHONBIN": "/usr/bin/python3"})
    site = ManagedProcess(
        "runsite", [PYTHON, "manage.py", "runsite", "--bind", f"127.0.0.1:{port}"], env, tmp_path, cwd=ROOT
    ).start()
    base = f"http://127.0.0.1:{port}"
    try:
        started = time.monotonic()
        while time.monotonic() - started < 60 and _get(f"{base}/healthz")[0] != 200:
            assert site.returncode is None, site.log_text()[-3000:]
            time.sleep(0.5)
        status, body = _get(f"{base}/healthz")
        assert status == 200, site.log_text()[-3000:]
        assert '"vendor": "sqlite"' in body and '"transport": "filesystem' in body
        assert _get(f"{base}/login/")[0] == 200

        log = site.log_text()
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
        csrf = next(c.value for c in jar if c.name == "csrftoken")
        data = urllib.parse.urlencode({"username": "admin", "password": password, "csrfmiddlewaretoken": csrf})
        request = urllib.request.Request(f"{base}/login/", data=data.encode(), headers={"Referer": f"{base}/login/"})
        with opener.open(request, timeout=10) as response:
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

        # Each demo door has its collector: the hosts page hears from both, none "never seen".
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            status, hosts = _get(f"{base}/hosts/", opener.open)
            assert status == 200
            if "door1" in hosts and "door2" in hosts and "never seen" not in hosts:
                break
            time.sleep(1)
        else:
            raise AssertionError(hosts[-2000:] + site.log_text()[-3000:])
    finally:
        if site.returncode is None:
            os.kill(site.pid, signal.SIGINT)  # what Ctrl-C does
            site.proc.wait(timeout=60)
        site.stop()
    assert site.proc.returncode == 0, site.log_text()[-3000:]
    children = [int(pid) for pid in re.findall(r"started [\w-]+ \(pid (\d+)\)", site.log_text())]
    assert len(children) == 5  # web, worker, beat, a collector per door
    assert not [pid for pid in children if os.path.exists(f"/proc/{pid}")]
    assert _get(f"{base}/healthz")[0] == 0, "the web server must be gone"
    for _, door_port in doors:
        assert not xroot_ping(int(door_port), timeout=2.0), "the doors must be gone"

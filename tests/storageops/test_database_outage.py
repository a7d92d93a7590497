"""PostgreSQL stops under a running deployment: pages and the API answer 503 (with
Retry-After, the API in its JSON error shape), never a 500 or a traceback, and answer again
once the database is back, without a restart of the web process.

The test owns its PostgreSQL: a cluster made with Debian's initdb in a temporary folder,
run as an unprivileged user on a free port, stopped and started again by its pid.
"""

from __future__ import annotations

import glob
import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import requests

from tests.support.ports import free_port
from tests.support.processes import PYTHON, ROOT, ManagedProcess
from tests.support.web import gunicorn_server
from tests.support.workers import child_env

PAGES = ["/", "/campaigns/", "/campaigns/runs/", "/hosts/events/", "/tokens/", "/login/",
         "/campaigns/compare/data.json?runs=1,2"]  # fmt: skip
API = [("get", "/api/v1/"), ("get", "/api/v1/runs/"), ("get", "/api/v1/campaigns/1/"),
       ("post", "/api/v1/events/")]  # fmt: skip


def _pg_bin() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        pytest.fail("Debian's PostgreSQL server binaries are missing (apt-get install postgresql)")
    return Path(found[-1]).parent


def _as_nobody(argv: list[str]) -> list[str]:
    # PostgreSQL refuses to run as root; setpriv execs in place, so our child's pid is the server's.
    if os.getuid() != 0:
        return argv
    return ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", *argv]


class OwnedPostgres:
    def __init__(self, log_dir: Path) -> None:
        self.bin = _pg_bin()
        self.log_dir = log_dir
        # Not under pytest's basetemp: its folders are 0700 and the server runs as nobody.
        self.data = Path(tempfile.mkdtemp(prefix="storageops-pg-"))
        if os.getuid() == 0:
            nobody = pwd.getpwnam("nobody")
            os.chown(self.data, nobody.pw_uid, nobody.pw_gid)
        self.port = free_port()
        self.proc: ManagedProcess | None = None
        subprocess.run(
            _as_nobody([str(self.bin / "initdb"), "-D", str(self.data), "-U", "storageops", "--auth=trust",
                        "--no-sync", "-E", "UTF8"]),
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip

    @property
    def url(self) -> str:
        return f"postgres://storageops@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        argv = _as_nobody([str(self.bin / "postgres"), "-D", str(self.data), "-p", str(self.port), "-h", "127.0.0.1",
                           "-k", str(self.data), "-c", "fsync=off"])  # fmt: skip
        self.proc = ManagedProcess(f"postgres-{self.port}", argv, dict(os.environ), self.log_dir).start()
        self.proc.wait_for_log("ready to accept connections", timeout=60)

    def stop(self) -> None:
        """A fast shutdown by the postmaster's pid (SIGINT), as an operator's restart does."""
        if self.proc and self.proc.returncode is None:
            os.kill(self.proc.pid, signal.SIGINT)
            self.proc.proc.wait(timeout=60)
        if self.proc:
            self.proc.stop()  # forgets it; the group is already gone

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.data, ignore_errors=True)


@pytest.fixture
def owned_postgres(log_dir):
    pg = OwnedPostgres(log_dir)
    try:
        pg.start()
        yield pg
    finally:
        pg.remove()


def _manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run([PYTHON, "manage.py", *args], cwd=ROOT, env=child_env(**env),
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


SETUP = """
from django.contrib.auth.models import Group, User
from storageops.api import tokens
user = User.objects.create_user("vera", password="correct horse battery staple")
user.groups.add(Group.objects.get(name="viewer"))
print("SECRET", tokens.create_token(user, "outage", "viewer")[1])
"""


def _login(base: str) -> requests.Session:
    session = requests.Session()
    page = session.get(f"{base}/login/", timeout=30)
    assert page.status_code == 200, page.text[:500]
    csrf = session.cookies["csrftoken"]
    done = session.post(f"{base}/login/", data={"username": "vera", "password": "correct horse battery staple",
                                                 "csrfmiddlewaretoken": csrf}, timeout=30)  # fmt: skip
    assert done.ok and "/login/" not in done.url, done.text[:500]
    return session


def test_a_database_outage_is_a_503_not_a_500(owned_postgres, log_dir, tmp_path):
    # As deployed: DEBUG off, static files collected (the 503 page links the hashed stylesheet).
    env = {"DATABASE_URL": owned_postgres.url, "STORAGEOPS_VAR_DIR": str(tmp_path), "DEBUG": "0"}
    _manage(env, "migrate", "--no-input")
    _manage(env, "collectstatic", "--no-input")
    secret = re.search(r"SECRET (\S+)", _manage(env, "shell", "-c", SETUP)).group(1)
    web, base = gunicorn_server(log_dir, **env)
    try:
        browser = _login(base)
        api = requests.Session()
        api.headers["Authorization"] = f"Token {secret}"
        assert browser.get(f"{base}/campaigns/", timeout=30).status_code == 200
        assert api.get(f"{base}/api/v1/runs/", timeout=30).status_code == 200

        owned_postgres.stop()
        answers = {}
        for path in PAGES:
            answers[f"page {path}"] = browser.get(f"{base}{path}", timeout=60, allow_redirects=False)
        for method, path in API:
            answers[f"token {method} {path}"] = getattr(api, method)(f"{base}{path}", json={}, timeout=60)
            answers[f"session {method} {path}"] = getattr(browser, method)(f"{base}{path}", json={}, timeout=60)
        answers["healthz"] = requests.get(f"{base}/healthz", timeout=60)
        wrong = {what: (r.status_code, r.text[:200]) for what, r in answers.items() if r.status_code != 503}
        assert wrong == {}
        for what, response in answers.items():
            assert response.headers.get("Retry-After") or what == "healthz", what
            if "/api/" in what or what.endswith(".json") or "json" in what:
                error = response.json()["error"]
                assert error["status"] == 503 and "database" in error["message"], (what, error)
            elif what != "healthz":
                assert "StorageOps is unavailable" in response.text, (what, response.text[:300])
        assert "Traceback" not in web.log_text(), web.log_text()[-3000:]

        owned_postgres.start()
        deadline = time.monotonic() + 30
        while browser.get(f"{base}/campaigns/", timeout=30).status_code != 200:
            assert time.monotonic() < deadline, "the pages did not come back after the database did"
            time.sleep(0.5)
        assert api.get(f"{base}/api/v1/runs/", timeout=30).status_code == 200
    finally:
        web.stop()

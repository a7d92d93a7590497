"""Tasks really travel through the broker to a separate worker process and back."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from django.conf import settings

from storageops.tasks import ping
from tests.support.processes import PYTHON, ROOT, ManagedProcess
from tests.support.workers import worker_queues


def test_task_round_trip_through_a_real_worker(worker):
    result = ping.delay("hello").get(timeout=60)
    assert result["pong"] == "hello"
    assert result["pid"] != os.getpid()
    assert settings.CELERY_BROKER_URL.split(":")[0] in worker.log_text()


_CLIENT = """
import django, json, time
django.setup()
from storageops.tasks import ping
from campaigns.models import Backend, Campaign, Endpoint, Run
from campaigns import runs
print(json.dumps(ping.delay("embedded").get(timeout=60)))
b = Backend.objects.create(name="mock", access_layer="xrootd")
src = Endpoint.objects.create(name="src", backend=b, url="mock://src.test/data/")
dst = Endpoint.objects.create(name="dst", backend=b, url="mock://dst.test/data/?time=0")
c = Campaign(name="embedded", file_count=200, file_size=1000, concurrency_steps=[4], checksum_mode="none")
c.save(); c.sources.add(src); c.destinations.add(dst)
run = runs.start_run(c, trigger="command")
deadline = time.time() + 90
while time.time() < deadline:
    run.refresh_from_db()
    if not run.is_live:
        break
    time.sleep(0.5)
print(json.dumps({"state": run.state, "done": run.files_done, "vendor": django.db.connection.vendor}))
"""


def test_embedded_defaults_run_a_task_and_a_campaign(tmp_path):
    """No server at all: SQLite and the filesystem broker under a fresh var/ folder."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env.update(
        {
            "STORAGEOPS_VAR_DIR": str(tmp_path / "var"),
            "DJANGO_SETTINGS_MODULE": "storageops.settings",
            "GFAL_PYTHONBIN": "/usr/bin/python3",
        }
    )
    subprocess.run([PYTHON, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True, timeout=120)
    worker = ManagedProcess(
        "embedded-worker",
        [
            PYTHON,
            "-m",
            "celery",
            "-A",
            "storageops",
            "worker",
            "-Q",
            worker_queues(),
            "-c",
            "2",
            "-n",
            "embedded@%h",
            "--without-mingle",
            "--without-gossip",
            "-l",
            "info",
        ],
        env,
        tmp_path,
        cwd=ROOT,
    ).start()
    try:
        worker.wait_for_log("ready.", timeout=60)
        assert "filesystem" in worker.log_text()
        out = subprocess.run([PYTHON, "-c", _CLIENT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
        assert out.returncode == 0, out.stderr[-3000:] + worker.log_text()[-3000:]
        lines = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
        assert lines[0]["pong"] == "embedded"
        assert lines[1] == {"state": "succeeded", "done": 200, "vendor": "sqlite"}
    finally:
        worker.stop()


@pytest.mark.django_db
def test_healthz_names_the_broker_transport(client):
    body = client.get("/healthz").json()
    expected = "redis" if settings.CELERY_BROKER_URL.startswith("redis") else "filesystem"
    assert expected in body["broker"]["transport"].lower()

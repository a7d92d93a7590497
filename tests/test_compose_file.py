"""docker-compose.yml is for users (no Docker engine runs here), so it is checked as a file:
by Debian's docker-compose, and against the settings StorageOps really reads."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.support.processes import ROOT

COMPOSE = ROOT / "docker-compose.yml"
STORAGEOPS_SERVICES = {"web", "worker", "control", "beat", "collector-door1", "client-wn01"}


def _compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def _settings_read() -> set[str]:
    """Every variable the settings module reads through storageops.env, and the *_FILE secrets."""
    text = (ROOT / "storageops" / "settings.py").read_text()
    names = set(re.findall(r'env_\w+\(\s*"([A-Z][A-Z0-9_]*)"', text))
    return names | {f"{name}_FILE" for name in names}


@pytest.mark.skipif(shutil.which("docker-compose") is None, reason="Debian's docker-compose is not installed")
def test_docker_compose_accepts_the_file(tmp_path: Path):
    # Debian ships Compose v1, which knows every key used here but the top-level project
    # `name:` of the Compose Specification (read by `docker compose` v2, which users run).
    text = COMPOSE.read_text()
    assert re.search(r"^name: storageops$", text, re.MULTILINE)
    stripped = tmp_path / "docker-compose.yml"
    stripped.write_text(re.sub(r"^name: storageops\n", "", text, flags=re.MULTILINE))
    result = subprocess.run(
        ["docker-compose", "-f", str(stripped), "--project-directory", str(ROOT), "config", "-q"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr


def test_the_file_runs_every_role_against_postgres_and_redis():
    services = _compose()["services"]
    assert STORAGEOPS_SERVICES | {"postgres", "redis", "xrootd-door1", "xrootd-door2"} <= set(services)
    for name in STORAGEOPS_SERVICES:
        env = services[name]["environment"]
        assert env["DATABASE_URL"].startswith("postgres://"), name
        assert env["CELERY_BROKER_URL"].startswith("redis://"), name


def test_the_runs_drivers_and_beats_short_tasks_have_a_worker_each():
    # Settings route every run's driver to "transfers" and beat's tasks to "control": a worker on
    # both would let long runs hold every slot while a silent collector's alert waits. (Compose
    # sets no STORAGEOPS_QUEUE_PREFIX; the tests do.)
    queues = {}
    for name, service in _compose()["services"].items():
        command = service.get("command") or []
        if command[:4] == ["celery", "-A", "storageops", "worker"]:
            queues[name] = command[command.index("-Q") + 1].split(",")
    assert queues == {"worker": ["transfers"], "control": ["control"]}


def test_every_variable_set_for_storageops_is_one_it_reads():
    known = _settings_read()
    services = _compose()["services"]
    for name in STORAGEOPS_SERVICES:
        unknown = {key for key in services[name]["environment"] if key not in known}
        assert not unknown, f"{name} sets variables StorageOps never reads: {sorted(unknown)}"


def test_the_image_leaves_the_development_site_out():
    # Production web, worker, beat and collector run without devsite (tests/test_architecture.py
    # checks that they never import it); the image says so once for every role.
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^\s*STORAGEOPS_DEVSITE=false\b", dockerfile, re.MULTILINE)
    assert "STORAGEOPS_DEVSITE" in _settings_read()
    for service in _compose()["services"].values():
        assert "runsite" not in str(service.get("command", "")), service

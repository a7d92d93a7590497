"""Settings come from the environment and refuse bad values at start-up, naming the variable."""

from __future__ import annotations

import os
import subprocess

import pytest
from django.core.exceptions import ImproperlyConfigured

from storageops.env import env_bool, env_int
from tests.support.processes import PYTHON, ROOT


def test_env_int_names_the_variable(monkeypatch):
    monkeypatch.setenv("STORAGEOPS_X", "ten")
    with pytest.raises(ImproperlyConfigured, match="STORAGEOPS_X='ten' is not an integer"):
        env_int("STORAGEOPS_X", 1)
    monkeypatch.setenv("STORAGEOPS_X", "0")
    with pytest.raises(ImproperlyConfigured, match="below the minimum 1"):
        env_int("STORAGEOPS_X", 1, minimum=1)


def test_env_bool(monkeypatch):
    monkeypatch.setenv("FLAG", "yes")
    assert env_bool("FLAG", False) is True
    monkeypatch.setenv("FLAG", "perhaps")
    with pytest.raises(ImproperlyConfigured, match="FLAG='perhaps' is not a boolean"):
        env_bool("FLAG", False)


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("CELERY_BROKER_URL", "amqp://guest@127.0.0.1//", "CELERY_BROKER_URL='amqp://guest@127.0.0.1//'"),
        ("CELERY_BROKER_URL", "filesystem://", "CELERY_BROKER_URL='filesystem://': use redis://host:port/db"),
        ("CELERY_BROKER_URL", None, "CELERY_BROKER_URL is not set. StorageOps runs on PostgreSQL and Redis only"),
        ("DATABASE_URL", "nosuchdb://x/y", "DATABASE_URL is not a usable database URL"),
        ("DATABASE_URL", "sqlite:///var/db.sqlite3", "DATABASE_URL must name a PostgreSQL database"),
        ("DATABASE_URL", None, "DATABASE_URL is not set. StorageOps runs on PostgreSQL and Redis only"),
        ("STORAGEOPS_RUN_LEASE_SECONDS", "1", "STORAGEOPS_RUN_LEASE_SECONDS=1 is below the minimum 5"),
        ("DEBUG", "maybe", "DEBUG='maybe' is not a boolean"),
    ],
)
def test_bad_setting_stops_start_up(tmp_path, variable, value, message):
    # Good URLs for the rest (the database and broker need not answer: `check` connects to neither).
    env = {**os.environ, "DATABASE_URL": "postgres://u@127.0.0.1:1/db", "CELERY_BROKER_URL": "redis://127.0.0.1:1/0"}
    env.update({"STORAGEOPS_VAR_DIR": str(tmp_path), variable: value})
    if value is None:
        del env[variable]
    result = subprocess.run(
        [PYTHON, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0
    assert message in result.stderr


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [("STORAGEOPS_WEB_WORKERS", "0", "STORAGEOPS_WEB_WORKERS=0 is below the minimum 1"),
     ("STORAGEOPS_WEB_THREADS", "four", "STORAGEOPS_WEB_THREADS='four' is not an integer")],
)  # fmt: skip
def test_a_bad_web_server_setting_stops_gunicorn_naming_it(tmp_path, variable, value, message):
    env = {**os.environ, "STORAGEOPS_VAR_DIR": str(tmp_path), variable: value}
    argv = [PYTHON, "-m", "gunicorn", "storageops.wsgi:application", "-c", "python:storageops.gunicorn_conf",
            "-b", "127.0.0.1:0", "--check-config"]  # fmt: skip
    result = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert message in result.stdout + result.stderr

"""The squashed initial migrations: a database at main's schema before the squash (campaigns
0014, collectors 0004, alerts 0003, storageops 0002) migrates forward with every row and link
kept, and a fresh database migrates from zero through the squashed graph, with no loop between
collectors and campaigns. Each in a scratch database of its own, in a process of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]
PROBE = ROOT / "tests" / "support" / "migration_probe.py"

pytestmark = pytest.mark.slow


@pytest.fixture
def scratch_database():
    db = settings.DATABASES["default"]
    name = f"storageops_migrations_{os.getpid()}"
    admin = {"host": db["HOST"], "port": db["PORT"] or 5432, "user": db["USER"], "password": db["PASSWORD"]}
    with psycopg.connect(dbname="postgres", autocommit=True, **admin) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    port = admin["port"]
    # The launcher's own PostgreSQL has a password; the CI's shared one trusts loopback.
    secret = f":{quote(db['PASSWORD'], safe='')}" if db["PASSWORD"] else ""
    yield f"postgres://{db['USER']}{secret}@{db['HOST']}:{port}/{name}"
    with psycopg.connect(dbname="postgres", autocommit=True, **admin) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _probe(url: str, *args: str) -> dict:
    env = {**os.environ, "DATABASE_URL": url, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(PROBE), *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_database_at_mains_schema_migrates_forward_with_its_data(scratch_database):
    before = _probe(scratch_database, "old")
    after = _probe(scratch_database, "forward")
    both, run_only = after["events"]
    assert both == {"pk": before["events"][0], "host_id": before["host"], "backend_id": before["backend"],
                    "endpoint_id": before["endpoints"][1], "run_id": before["run"]}  # fmt: skip
    assert run_only == {"pk": before["events"][1], "host_id": None, "backend_id": None, "endpoint_id": None,
                        "run_id": before["run"]}  # fmt: skip
    assert after["transfers"] == 2
    assert after["campaign_endpoints"] == [[before["endpoints"][0]], [before["endpoints"][1]]]
    assert after["endpoint_hosts"][str(before["endpoints"][1])] == [before["host"]]
    assert after["subscription_campaign"] == before["campaign"]
    # The event's links to campaigns lost their constraint, not their values; host and user kept theirs.
    assert after["event_foreign_keys"] == ["host_id", "user_id"]
    assert after["unapplied"] == []


def test_a_fresh_database_migrates_through_the_squashed_graph(scratch_database):
    env = {**os.environ, "DATABASE_URL": scratch_database}
    done = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput"], env=env, cwd=ROOT, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Applying collectors.0001_squashed_0005_event_refers_by_id... OK" in done.stdout
    assert "Applying campaigns.0001_squashed_0002_initial... OK" in done.stdout
    assert "collectors.0001_initial" not in done.stdout and "campaigns.0002_initial" not in done.stdout
    # collectors' schema comes before campaigns' and never waits for it.
    assert done.stdout.index("collectors.0001_squashed") < done.stdout.index("campaigns.0001_squashed")


def test_collectors_migrations_do_not_depend_on_campaigns():
    from django.db.migrations.loader import MigrationLoader

    graph = MigrationLoader(None, ignore_no_migrations=True).graph
    for key in graph.leaf_nodes("collectors"):
        assert not [k for k in graph.forwards_plan(key) if k[0] == "campaigns"], key

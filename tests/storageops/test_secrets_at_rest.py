"""Secrets at rest, against the world: every kind of secret StorageOps keeps is set as a site sets
it (the API, the Alerts page), the database is dumped with the real pg_dump, and not one secret
is in the dump; yet each still works where it is used: the endpoint's token reaches a door with
the copies' gfal2 context, the FTS token authenticates to an FTS double, and the webhook is
POSTed to its real URL, all on loopback servers started here."""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from django.db import connection

from alerts.models import Subscription
from campaigns.models import Endpoint, TokenIssuer
from campaigns.runs.engines.fts.client import FtsClient, FtsError, FtsSettings
from campaigns.runs.engines.fts.models import FtsInstance
from campaigns.runs.engines.gfal2.executor import build_copier
from campaigns.runs.planning import campaign_snapshot
from storageops.sealed import PREFIX
from tests.support.api import api
from tests.support.factories import campaign
from tests.support.fts_double import FtsDouble

pytestmark = pytest.mark.django_db(transaction=True)

ENDPOINT_TOKEN = "eyJhbGciOiJFUzI1NiJ9.door-token-7Qx2Lm"
FTS_TOKEN = "eyJhbGciOiJSUzI1NiJ9.fts-token-Vb8Rk3"
ISSUER_SECRET = "iam-client-secret-Zp4Wq9"
HOOK_KEY = "Zq7wY4kP2mN9xR5tB8cV1dF6gH"  # a Mattermost-like 26-character key: the webhook's secret
HOOK_QUERY_SECRET = "s1gn4tur3Kq"


class _Recorder(BaseHTTPRequestHandler):
    """A door and a chat server in one: answers every request 200 and notes what it was asked."""

    protocol_version = "HTTP/1.1"
    seen: list[tuple[str, str, str]]

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self.seen.append((self.command, self.path, self.headers.get("Authorization", "")))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_HEAD = do_POST = do_PROPFIND = _answer

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def recorder():
    handler = type("Handler", (_Recorder,), {"seen": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler.seen
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def fts():
    double = FtsDouble(token=FTS_TOKEN).start()
    try:
        yield double
    finally:
        double.stop()


def pg_dump_path() -> str:
    """Debian's pg_dump of the server's major version (an older one refuses a newer server)."""
    major = connection.pg_version // 10000
    found = glob.glob(f"/usr/lib/postgresql/{major}/bin/pg_dump")
    if not found and shutil.which("pg_config"):
        bindir = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, check=True).stdout.strip()
        found = [path for path in [f"{bindir}/pg_dump"] if Path(path).exists()]
    assert found, f"no pg_dump for PostgreSQL {major} (Debian's postgresql-client-{major})"
    return found[0]


def pg_dump() -> str:
    db = connection.settings_dict
    argv = [pg_dump_path(), "--no-owner", "--dbname", db["NAME"], "--username", db["USER"]]
    if db["HOST"]:
        argv += ["--host", db["HOST"]]
    if db["PORT"]:
        argv += ["--port", str(db["PORT"])]
    env = {**os.environ, "PGPASSWORD": db["PASSWORD"] or ""}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_no_secret_is_in_a_dump_of_the_database_and_each_still_works(client, admin_user, recorder, fts):
    door, seen = recorder
    admin = api(admin_user, "admin")

    # Set as a site sets them: the endpoint and the FTS instance through the API ...
    backend = admin.post("/api/v1/backends/", {"name": "door-backend", "access_layer": "xrootd"}, format="json")
    assert backend.status_code == 201, backend.content
    created = admin.post("/api/v1/endpoints/", {"name": "tokened-door", "backend": backend.json()["id"],
                                                "url_prefix": f"{door}/data/", "bearer_token": ENDPOINT_TOKEN},
                         format="json")  # fmt: skip
    assert created.status_code == 201, created.content
    plain = admin.post("/api/v1/endpoints/", {"name": "plain-door", "backend": backend.json()["id"],
                                              "url_prefix": f"{door}/other/"}, format="json")  # fmt: skip
    assert plain.status_code == 201, plain.content
    instance = admin.post("/api/v1/fts-instances/", {"name": "site-fts", "rest_url": fts.url,
                                                     "bearer_token": FTS_TOKEN}, format="json")  # fmt: skip
    assert instance.status_code == 201, instance.content
    issuer = admin.post("/api/v1/token-issuers/", {"name": "site-iam", "token_endpoint": "https://iam.test/token",
                                                   "client_id": "storageops", "client_secret": ISSUER_SECRET},
                        format="json")  # fmt: skip
    assert issuer.status_code == 201 and "client_secret" not in issuer.json(), issuer.content
    assert TokenIssuer.objects.get(pk=issuer.json()["id"]).client_secret == ISSUER_SECRET
    # ... and the webhook through the Alerts page.
    hook = f"{door}/hooks/{HOOK_KEY}?sig={HOOK_QUERY_SECRET}"
    client.force_login(admin_user)
    page = client.post("/alerts/new/", {"name": "storage chat", "campaign": "", "kinds": ["regression"],
                                        "email": "", "webhook_url": hook, "min_interval_minutes": "30",
                                        "repeat_ongoing_hours": "24", "active": "on"})  # fmt: skip
    assert page.status_code == 302, page.content.decode()[:2000]
    subscription = Subscription.objects.get(name="storage chat")

    # Each still works where it is used. The webhook: POSTed to its real URL.
    response = client.post(f"/alerts/{subscription.pk}/test/", follow=True)
    assert response.status_code == 200
    assert ("POST", f"/hooks/{HOOK_KEY}?sig={HOOK_QUERY_SECRET}", "") in seen
    # The FTS token: the FTS double (which refuses any other token) answers the client of the instance.
    settings = FtsSettings.from_instance(FtsInstance.objects.get(pk=instance.json()["id"]))
    assert settings.bearer_token == FTS_TOKEN
    assert any(link["symbolicname"] == "*" for link in FtsClient(settings).links())
    with pytest.raises(FtsError, match="FTS 403"):
        FtsClient(FtsSettings(url=fts.url, bearer_token=PREFIX + "what-a-sealed-token-would-be")).links()
    # The endpoint's token: the gfal2 context the run's copies use presents it to the door.
    endpoint = Endpoint.objects.get(pk=created.json()["id"])
    other = Endpoint.objects.get(pk=plain.json()["id"])
    copier = build_copier(campaign_snapshot(campaign("sealed-run", [endpoint], [other])))
    ctx, _ = copier._context()
    assert ctx.cred_get("BEARER", f"{door}/data/probe")[0] == ENDPOINT_TOKEN
    ctx.stat(f"{door}/data/probe")
    asked = [(method, path, auth) for method, path, auth in seen if path == "/data/probe"]
    assert asked and all(auth == f"Bearer {ENDPOINT_TOKEN}" for _, _, auth in asked), asked

    # And the database, dumped as a backup would be, holds none of them.
    dump = pg_dump()
    assert "tokened-door" in dump and "storage chat" in dump and "site-fts" in dump, "the dump holds the rows"
    secrets = {"endpoint token": ENDPOINT_TOKEN, "FTS token": FTS_TOKEN, "webhook URL": hook,
               "webhook key": HOOK_KEY, "webhook query secret": HOOK_QUERY_SECRET,
               "token issuer's client secret": ISSUER_SECRET}  # fmt: skip
    hits = {name: dump.count(secret) for name, secret in secrets.items()}
    print(f"pg_dump {pg_dump_path()}: {len(dump)} characters, {dump.count(PREFIX)} sealed values; hits: {hits}")
    assert hits == dict.fromkeys(secrets, 0)
    assert dump.count(PREFIX) >= 4, "the four secrets are there, sealed"
    # Not even their distinctive middles (a secret cut into a longer text, a log line, a change record).
    for secret in (ENDPOINT_TOKEN, FTS_TOKEN):
        assert not re.search(re.escape(secret.split(".")[1]), dump)

"""Shared fixtures: personas, a log folder, real worker processes, and where alerts land."""

from __future__ import annotations

import socket
import time
import warnings

import pytest
from django.contrib.auth.models import Group, User
from django.core.servers.basehttp import ThreadedWSGIServer
from django.test.testcases import LiveServerThread

from storageops import roles
from tests.support import flush_snapshot
from tests.support.workers import celery_worker


class _NoDelayWSGIServer(ThreadedWSGIServer):
    """wsgiref sends a response's status line and its headers as two writes; with Nagle's
    algorithm on, the second waits for the client's delayed ACK, 40 ms per request on loopback.
    The live server answers schemathesis' thousands of requests and the browser tests."""

    def get_request(self):
        sock, address = super().get_request()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock, address


LiveServerThread.server_class = _NoDelayWSGIServer


@pytest.fixture(scope="session", autouse=True)
def _post_migrate_rows_replayed_after_each_flush():
    """See tests/support/flush_snapshot.py: 0.14 s of CPU saved per transactional test."""
    undo = flush_snapshot.install()
    yield
    undo()


@pytest.fixture(scope="session", autouse=True)
def _test_database_left_alone_at_the_end(django_db_setup, django_db_blocker):
    """Before pytest-django drops the test database, let the sessions of processes a test just
    stopped end (PostgreSQL closes a killed client's backend a moment later), and end any left:
    a drop that found one left the database behind on every such run ("being accessed by
    other users"), one more on the machine each time."""
    yield
    from django.db import connection

    if not connection.settings_dict["NAME"].startswith("test_"):
        # No test of this process used the database, so none was made: the connection is the
        # site's own database, where the other test processes' sessions must be left alone.
        return
    others = (
        "SELECT pid, state, left(query, 120) FROM pg_stat_activity "
        "WHERE datname = current_database() AND pid <> pg_backend_pid()"
    )
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        deadline = time.monotonic() + 10
        while True:
            cursor.execute(others)
            left = cursor.fetchall()
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        for pid, state, query in left:
            # Named, so the test that left it can be found: its last statement says whose it was.
            warnings.warn(f"ended a session left on the test database: pid {pid}, {state}, {query!r}", stacklevel=1)
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    # PBKDF2's deliberate slowness costs ~0.3 s a persona; tests do not need it.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _static_without_manifest(settings):
    # The hashed manifest exists only after collectstatic; tests serve the source files.
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }


def _user(username: str, role: str | None) -> User:
    user = User.objects.create_user(username, password="correct horse battery staple")
    if role:
        user.groups.add(Group.objects.get(name=role))
        user.is_staff = role == roles.ADMIN
        user.save()
    return user


@pytest.fixture
def viewer(db) -> User:
    return _user("vera-viewer", roles.VIEWER)


@pytest.fixture
def operator(db) -> User:
    return _user("otto-operator", roles.OPERATOR)


@pytest.fixture
def admin_user(db) -> User:
    return _user("ada-admin", roles.ADMIN)


@pytest.fixture
def outsider(db) -> User:
    return _user("olga-outsider", None)


@pytest.fixture
def log_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("logs")


@pytest.fixture
def worker(transactional_db, log_dir):
    """A real Celery worker process consuming the control and transfers queues."""
    process = celery_worker(log_dir)
    try:
        process.wait_for_log("ready.", timeout=60)
        yield process
    finally:
        process.stop()


# -- where alerts land: a real SMTP server and a real webhook server on loopback ---------------------
@pytest.fixture
def mailbox(settings):
    """Django's mail sent to a real SMTP server; .messages keeps what it received."""
    # Imported here: only the tests that take it load the standard library's deprecated smtpd.
    from tests.support.alert_servers import smtp_server

    with smtp_server() as server:
        settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
        settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", server.port
        settings.STORAGEOPS_BASE_URL = "https://storageops.example.org"
        yield server


@pytest.fixture
def webhook():
    """A real webhook server: its URL, and the JSON bodies POSTed to it."""
    from tests.support.alert_servers import webhook_server

    with webhook_server() as hook:
        yield hook.url, hook.received


# -- real XRootD servers on loopback -------------------------------------------------------------
@pytest.fixture(scope="session")
def xrootd_pair(tmp_path_factory):
    """Two plain XRootD doors (root://, TPC enabled, adler32), run as nobody on free ports."""
    from devsite.xrootd_server import XRootDServer

    base = tmp_path_factory.mktemp("xrootd")
    servers = [XRootDServer(name, base / name, workdir=base / f"{name}-run").start() for name in ("door1", "door2")]
    try:
        yield servers
    finally:
        for server in servers:
            server.stop()


@pytest.fixture(scope="session")
def test_ca(tmp_path_factory):
    from devsite.xrootd_server import make_test_ca

    return make_test_ca(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="session")
def grid_credentials(tmp_path_factory, test_ca):
    """GSI for gsiftp://: the test CA with its signing policy, a user proxy, a grid-mapfile."""
    from devsite.gridftp_server import make_grid_credentials

    return make_grid_credentials(test_ca, tmp_path_factory.mktemp("gsi"))


@pytest.fixture(scope="session")
def gridftp_pair(tmp_path_factory, grid_credentials):
    """Two real globus-gridftp-servers with GSI on loopback ports (Debian's globus-gridftp-server-progs)."""
    from devsite.gridftp_server import GridFTPServer

    base = tmp_path_factory.mktemp("gridftp")
    servers = []
    try:
        for name in ("gftp1", "gftp2"):
            servers.append(GridFTPServer(name, base / name / "data", grid_credentials).start())
        yield servers
    finally:
        for server in servers:
            server.stop()


@pytest.fixture(scope="session")
def xrootd_https_pair(tmp_path_factory, test_ca):
    """Two XRootD doors that also serve HTTPS (davs) with XrdHttpTPC, certified by a throw-away CA."""
    from devsite.xrootd_server import XRootDServer

    base = tmp_path_factory.mktemp("xrootd-https")
    servers = [
        XRootDServer(name, base / name, https=test_ca, workdir=base / f"{name}-run").start()
        for name in ("https1", "https2")
    ]
    try:
        yield servers
    finally:
        for server in servers:
            server.stop()


TOKEN_AUDIENCE = "https://storageops.test/doors"


@pytest.fixture(scope="session")
def token_doors(tmp_path_factory, test_ca):
    """A storage-token issuer (devsite.token_issuer, a double of a site's IAM, over HTTPS) and two
    XRootD doors (davs) that check its tokens with Debian's real SciTokens plugin, fetching its
    keys over HTTPS: (issuer, door a, door b). Scopes are relative to the doors' /data."""
    from devsite.token_issuer import TokenIssuer
    from devsite.xrootd_server import TokenTrust, XRootDServer

    issuer = TokenIssuer(test_ca).start()
    trust = TokenTrust(issuer.url, TOKEN_AUDIENCE, test_ca.ca_cert, base_path="/data")
    base = tmp_path_factory.mktemp("xrootd-tokens")
    servers = []
    try:
        for name in ("tokens1", "tokens2"):
            door = XRootDServer(name, base / name, https=test_ca, workdir=base / f"{name}-run", tokens=trust)
            servers.append(door.start())
        yield issuer, *servers
    finally:
        for server in servers:
            server.stop()
        issuer.stop()


@pytest.fixture
def token_site(token_doors, test_ca):
    """The token doors and their issuer registered as a TokenIssuer: (issuer, door a, door b, row)."""
    from campaigns.models import TokenIssuer

    issuer, a, b = token_doors
    row = TokenIssuer.objects.create(
        name="test-iam", token_endpoint=issuer.token_endpoint, client_id=issuer.client_id,
        client_secret=issuer.client_secret, audience=TOKEN_AUDIENCE, base_path="/data", ca_file=str(test_ca.ca_cert),
    )  # fmt: skip
    return issuer, a, b, row


# -- single sign-on: a real OpenID provider (node oidc-provider) on loopback ---------------------------
SSO_ACCOUNTS = {
    "otto": {"groups": ["/storage", "/storage/ops"], "email": "otto@example.org"},
    "nora": {"groups": ["/elsewhere"], "email": "nora@example.org"},
}


@pytest.fixture
def oidc_provider(live_server, log_dir, settings):
    """The provider, and StorageOps (the live server too) configured to sign in through it."""
    from storageops.oidc import discovery
    from tests.support.oidc_provider import start_provider

    provider = start_provider(
        log_dir, f"{live_server.url}/oidc/callback/", SSO_ACCOUNTS, post_logout_uri=f"{live_server.url}/login/"
    )
    settings.STORAGEOPS_OIDC = provider.config()
    settings.AUTHENTICATION_BACKENDS = [  # as storageops/settings.py lists them with sign-on set up
        "storageops.grants.CachedModelBackend",
        "django.contrib.auth.backends.ModelBackend",
        "storageops.oidc.backend.ProviderBackend",
    ]
    discovery.forget()
    try:
        yield provider
    finally:
        provider.stop()
        discovery.forget()

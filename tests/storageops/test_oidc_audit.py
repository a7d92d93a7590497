"""Sign-on as an admin sets it up and audits it, against the real test provider (node oidc-provider):
a role change made by sign-on is one change record (who, roles and the provider's groups before and
after, "sign-on from <issuer>") that the admin's Change records list shows; `make run`'s banner says
whether sign-on is on; devsite.sso_provider (make sso-provider) prints variables that configure it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from urllib.parse import urljoin

import pytest
import requests

from devsite import sso_provider
from devsite.management.commands.runsite import sign_on_lines
from storageops.models import ChangeRecord, ExternalIdentity
from storageops.oidc import config as oidc_config
from storageops.oidc import discovery
from tests.support.ports import free_port
from tests.support.processes import PYTHON, ROOT

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def sign_in(live_server, login: str) -> requests.Session:
    """The browser's way through StorageOps' sign-in button and the provider's login form."""
    browser = requests.Session()
    form = browser.get(f"{live_server.url}/oidc/sign-in/", timeout=15)
    action = re.search(r'<form[^>]*action="([^"]+)"', form.text)
    assert action, form.text[:2000]
    done = browser.post(
        urljoin(form.url, action.group(1)), data={"prompt": "login", "login": login, "password": "any"}, timeout=15
    )
    assert done.url == f"{live_server.url}/", (done.url, done.text[:1000])
    return browser


def _records(identity: ExternalIdentity) -> list[ChangeRecord]:
    return list(ChangeRecord.objects.filter(object_type="auth.user", object_id=identity.user_id).order_by("pk"))


def test_a_role_change_by_sign_on_is_one_record_the_admin_change_records_show(
    live_server, oidc_provider, admin_user, client
):
    sign_in(live_server, "otto")  # groups /storage, /storage/ops: viewer and operator
    identity = ExternalIdentity.objects.get(issuer=oidc_provider.issuer, subject="otto")
    first = _records(identity)
    assert [r.changes["roles"] for r in first] == [[[], ["operator", "viewer"]]]

    # Group A again: nothing changed, nothing recorded.
    sign_in(live_server, "otto")
    assert len(_records(identity)) == 1

    oidc_provider.set_groups("otto", ["/storage"])  # group B: the operators' group is gone
    sign_in(live_server, "otto")
    records = _records(identity)
    assert len(records) == 2
    record = records[-1]
    assert record.user_name == f"sign-on from {oidc_provider.issuer}"
    assert record.via == "sso" and record.action == "update" and record.object_repr == "otto"
    assert record.before == {
        "roles": ["operator", "viewer"],
        "is_staff": False,
        "provider_groups": ["/storage", "/storage/ops"],
    }
    assert record.after == {"roles": ["viewer"], "is_staff": False, "provider_groups": ["/storage"]}
    assert record.changes == {
        "provider_groups": [["/storage", "/storage/ops"], ["/storage"]],
        "roles": [["operator", "viewer"], ["viewer"]],
    }

    # Where an admin looks: Admin → Change records, filtered to sign-on.
    client.force_login(admin_user)
    page = client.get("/admin/storageops/changerecord/?via=sso").content.decode()
    assert f"sign-on from {oidc_provider.issuer}" in page
    assert "roles: operator, viewer → viewer; provider_groups: /storage, /storage/ops → /storage" in page
    detail = client.get(f"/admin/storageops/changerecord/{record.pk}/change/")
    assert detail.status_code == 200
    assert "operator" in detail.content.decode()


def test_an_api_token_changing_roles_is_recorded_as_the_bearer_token(oidc_provider, settings):
    from rest_framework.test import APIClient

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {oidc_provider.access_token('otto')}")
    assert api.get("/api/v1/campaigns/").status_code == 200
    identity = ExternalIdentity.objects.get(issuer=oidc_provider.issuer, subject="otto")
    assert [r.user_name for r in _records(identity)] == [f"bearer token from {oidc_provider.issuer}"]


def test_the_banner_says_whether_sign_on_is_on_and_whether_the_provider_answers(oidc_provider, settings):
    lines = [line for line, _ in sign_on_lines("127.0.0.1:8123")]
    assert lines == [
        f"Sign-on: on, issuer {oidc_provider.issuer} (groups → roles: /storage → viewer, /storage/ops → operator, "
        "/storage/admins → admin; claim 'groups')",
        "  redirect URI to register at the provider: http://127.0.0.1:8123/oidc/callback/",
    ]
    oidc_provider.stop()
    discovery.forget()
    warned = sign_on_lines("127.0.0.1:8123")
    assert warned[-1][1] is True
    assert "the provider does not answer now" in warned[-1][0]

    settings.STORAGEOPS_OIDC = None
    assert sign_on_lines("127.0.0.1:8123") == [
        ("Sign-on: off (set STORAGEOPS_OIDC_ISSUER and the rest: docs/security.md)", False)
    ]


def test_make_sso_provider_prints_variables_that_configure_sign_on(tmp_path, monkeypatch):
    var = tmp_path / "var"
    env = {**os.environ, "STORAGEOPS_VAR_DIR": str(var), "STORAGEOPS_BIND": f"127.0.0.1:{free_port()}"}
    proc = subprocess.Popen(
        [PYTHON, "-m", "devsite.sso_provider"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        env_file = var / sso_provider.ENV_FILE_NAME
        deadline = time.monotonic() + 60
        while not env_file.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert env_file.exists(), proc.stdout.read() if proc.poll() is not None else "no env file"
        assert env_file.stat().st_mode & 0o777 == 0o600
        variables = dict(
            line.removeprefix("export ").split("=", 1) for line in env_file.read_text().splitlines() if "=" in line
        )
        variables = {name: value.strip("'") for name, value in variables.items()}
        for name, value in variables.items():
            monkeypatch.setenv(name, value)
        cfg = oidc_config.from_env()
        assert cfg is not None and cfg.provider_name == "Test IAM"
        assert cfg.role_map == {"viewer": ("/storage",), "operator": ("/storage/ops",), "admin": ("/storage/admins",)}
        metadata = requests.get(f"{cfg.issuer}/.well-known/openid-configuration", timeout=10).json()
        assert metadata["issuer"] == cfg.issuer

        changed = subprocess.run(
            [PYTHON, "-m", "devsite.sso_provider", "groups", "alice", "/storage"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert changed.returncode == 0, changed.stderr
        assert "alice's groups" in changed.stdout
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out
    assert "export STORAGEOPS_OIDC_ISSUER=http://127.0.0.1:" in out
    assert "Test provider stopped." in out
    assert not env_file.exists()

"""Token issuers and endpoints on them through the API and the admin: every field validated,
role-guarded, the client secret write-only."""

from __future__ import annotations

import pytest
from django.test import Client

from campaigns.models import TokenIssuer
from tests.support.api import api
from tests.support.factories import backend

pytestmark = pytest.mark.django_db
SECRET = "iam-client-secret-Qw7"


def issuer_body(**fields) -> dict:
    return {
        "name": "site-iam", "token_endpoint": "https://iam.example.org/token", "client_id": "storageops",
        "client_secret": SECRET, "audience": "https://doors.example.org", "base_path": "/data", **fields,
    }  # fmt: skip


def test_an_issuer_is_validated_and_its_secret_never_returned(admin_user, viewer):
    admin = api(admin_user, "admin")
    bad = admin.post("/api/v1/token-issuers/", issuer_body(
        token_endpoint="http://iam.example.org/token", client_id="two words", client_secret="",
        base_path="data/../x", ca_file="certs", timeout=0), format="json")  # fmt: skip
    assert bad.status_code == 400
    fields = bad.json()["error"]["fields"]
    assert set(fields) == {"token_endpoint", "client_id", "client_secret", "base_path", "ca_file", "timeout"}, fields
    assert "https://" in fields["token_endpoint"][0]
    assert api(viewer, "viewer").post("/api/v1/token-issuers/", issuer_body(), format="json").status_code == 403
    created = admin.post("/api/v1/token-issuers/", issuer_body(), format="json")
    assert created.status_code == 201, created.content
    pk = created.json()["id"]
    assert created.json()["has_secret"] is True and "client_secret" not in created.json()
    # An update that does not mention the secret keeps it.
    assert admin.patch(f"/api/v1/token-issuers/{pk}/", {"timeout": 20}, format="json").status_code == 200
    assert TokenIssuer.objects.get(pk=pk).client_secret == SECRET
    for path in ("/api/v1/token-issuers/", f"/api/v1/token-issuers/{pk}/"):
        response = api(viewer, "viewer").get(path)
        assert response.status_code == 200 and SECRET not in response.content.decode(), path


def test_an_endpoint_takes_an_issuer_or_a_static_token_on_a_davs_door_below_its_base(admin_user):
    admin = api(admin_user, "admin")
    issuer = TokenIssuer.objects.create(**issuer_body())
    body = {"name": "door", "backend": backend("b").pk, "url_prefix": "davs://door.example.org:1094/data/atlas/",
            "token_issuer": issuer.pk}  # fmt: skip
    for change, why in (({"bearer_token": "static"}, "not both"), ({"url_prefix": "root://door:1094//data/x/"},
                        "davs:// and https://"), ({"url_prefix": "davs://door:1094/other/"}, "base path"),
                        ({"token_issuer": 999999}, "")):  # fmt: skip
        refused = admin.post("/api/v1/endpoints/", {**body, **change}, format="json")
        assert refused.status_code == 400 and why in str(refused.json()["error"]["fields"]["token_issuer"]), change
    created = admin.post("/api/v1/endpoints/", body, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["token_issuer"] == issuer.pk and created.json()["has_token"] is False


def test_admin_form_keeps_the_client_secret_write_only(admin_user):
    issuer = TokenIssuer.objects.create(**issuer_body())
    client = Client()
    client.force_login(admin_user)
    page = client.get(f"/admin/campaigns/tokenissuer/{issuer.pk}/change/")
    assert page.status_code == 200 and SECRET not in page.content.decode()
    form = {**issuer_body(client_secret=""), "timeout": 15}
    saved = client.post(f"/admin/campaigns/tokenissuer/{issuer.pk}/change/", form)
    assert saved.status_code == 302, saved.content.decode()[:2000]
    issuer.refresh_from_db()
    assert issuer.client_secret == SECRET and issuer.timeout == 15
    fresh = client.post("/admin/campaigns/tokenissuer/add/", {**form, "name": "no-secret"})
    assert fresh.status_code == 200 and not TokenIssuer.objects.filter(name="no-secret").exists()

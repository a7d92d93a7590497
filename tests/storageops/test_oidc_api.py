"""The API and the provider's access tokens, against a real OpenID provider process: a valid JWT
acts with the role its groups map to; an expired one, one from another issuer, one for another
audience are refused with 401; StorageOps' own API tokens keep working beside them."""

from __future__ import annotations

import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from storageops.api import tokens
from storageops.models import ChangeRecord, ExternalIdentity
from tests.conftest import SSO_ACCOUNTS
from tests.support.factories import mock_campaign
from tests.support.oidc_provider import start_provider

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _api(token: str, keyword: str = "Bearer") -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"{keyword} {token}")
    return client


def _message(response) -> str:
    return response.json()["error"]["message"]


def test_a_provider_token_acts_with_its_mapped_role_and_follows_the_groups(oidc_provider):
    campaign = mock_campaign("sso-api")
    start = f"/api/v1/campaigns/{campaign.pk}/start/"

    as_operator = _api(oidc_provider.access_token("otto"))
    assert as_operator.get("/api/v1/campaigns/").status_code == 200
    started = as_operator.post(start)
    assert started.status_code in (200, 201, 202), started.content
    identity = ExternalIdentity.objects.get(issuer=oidc_provider.issuer, subject="otto")
    assert tokens.user_role(identity.user) == "operator"
    assert identity.groups == ["/storage", "/storage/ops"]

    # The provider drops otto from the operators: the next token carries the change.
    oidc_provider.set_groups("otto", ["/storage"])
    as_viewer = _api(oidc_provider.access_token("otto"))
    assert as_viewer.get("/api/v1/campaigns/").status_code == 200
    assert as_viewer.post(start).status_code == 403
    identity.user.refresh_from_db()
    assert tokens.user_role(identity.user) == "viewer"
    records = ChangeRecord.objects.filter(object_type="auth.user", object_id=identity.user.pk).order_by("pk")
    assert [r.changes["roles"] for r in records] == [[[], ["operator", "viewer"]], [["operator", "viewer"], ["viewer"]]]
    assert {(r.user_name, r.via) for r in records} == {(f"bearer token from {oidc_provider.issuer}", "sso")}

    # Groups that map to nothing: authenticated, but no role (403, not 401).
    nobody = _api(oidc_provider.access_token("nora"))
    assert nobody.get("/api/v1/campaigns/").status_code == 403

    # An account a StorageOps admin disabled stays out, whatever the provider says.
    identity.user.is_active = False
    identity.user.save()
    refused = as_viewer.get("/api/v1/campaigns/")
    assert refused.status_code == 401
    assert _message(refused) == "The account of this token is disabled."


def test_an_expired_token_is_refused(oidc_provider, settings):
    settings.STORAGEOPS_OIDC = oidc_provider.config(leeway_seconds=0)
    oidc_provider.set_access_token_ttl(3)
    token = oidc_provider.access_token("otto")
    assert _api(token).get("/api/v1/campaigns/").status_code == 200  # valid for those three seconds
    time.sleep(4)
    refused = _api(token).get("/api/v1/campaigns/")
    assert refused.status_code == 401
    assert "expired" in _message(refused)


def test_a_token_of_another_issuer_or_audience_is_refused(oidc_provider, log_dir):
    # Another real provider on another port, with an account of the same name and groups (and,
    # oidc-provider's development keys being the same everywhere, the same signing key: only the
    # issuer tells its tokens apart).
    foreign = start_provider(log_dir, oidc_provider.redirect_uri, SSO_ACCOUNTS)
    try:
        token = foreign.access_token("otto")
    finally:
        foreign.stop()
    refused = _api(token).get("/api/v1/campaigns/")
    assert refused.status_code == 401, refused.content
    assert _message(refused) == (
        f"The bearer token is refused: issued by '{foreign.issuer}', not by '{oidc_provider.issuer}'."
    )

    other_audience = oidc_provider.access_token("otto", resource="http://another-service.test/")
    refused = _api(other_audience).get("/api/v1/campaigns/")
    assert refused.status_code == 401
    assert "audience" in _message(refused)
    assert not ExternalIdentity.objects.exists()


def test_a_tampered_token_is_refused(oidc_provider):
    header, payload, signature = oidc_provider.access_token("otto").split(".")
    forged = f"{header}.{payload}.{signature[:-4]}AAAA"
    assert _api(forged).get("/api/v1/campaigns/").status_code == 401


def test_storageops_api_tokens_keep_working_beside_the_provider(oidc_provider, operator):
    _, secret = tokens.create_token(operator, "ansible", "viewer")
    assert _api(secret, "Token").get("/api/v1/campaigns/").status_code == 200
    assert _api(secret, "Bearer").get("/api/v1/campaigns/").status_code == 200
    assert _api("not-a-token", "Token").get("/api/v1/campaigns/").status_code == 401


def test_a_provider_token_costs_no_more_queries_than_an_api_token(oidc_provider, operator):
    """Checked on every API call: the key set is cached, the user's roles read in one query and
    written only when they change, the identity's last_seen at most once a minute."""
    _, secret = tokens.create_token(operator, "ansible", "viewer")
    counts, asked = {}, {}
    for keyword, credential in (("Bearer", oidc_provider.access_token("otto")), ("Token", secret)):
        client = _api(credential, keyword)
        assert client.get("/api/v1/campaigns/").status_code == 200  # the first: user made, roles set
        with CaptureQueriesContext(connection) as queries:
            assert client.get("/api/v1/campaigns/").status_code == 200
        counts[keyword] = len(queries)
        asked[keyword] = [q["sql"][:160] for q in queries.captured_queries]
    assert counts["Bearer"] <= counts["Token"], (counts, asked)

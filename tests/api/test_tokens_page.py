"""Tokens are created in the dashboard (secret shown once), used, and revoked there."""

from __future__ import annotations

import re

import pytest

from storageops.models import APIToken

pytestmark = pytest.mark.django_db


def test_create_use_and_revoke_a_token(client, operator):
    client.force_login(operator)
    too_high = client.post("/tokens/", {"name": "ci", "role": "admin"})
    assert too_high.status_code == 400 and b"more rights than its owner" in too_high.content
    page = client.post("/tokens/", {"name": "ci pipeline", "role": "operator"})
    assert page.status_code == 200
    secret = re.search(rb'<pre id="new-token">([^<]+)</pre>', page.content).group(1).decode()
    token = APIToken.objects.get(user=operator)
    assert secret not in str(token.__dict__)
    assert client.get("/tokens/").content.count(secret.encode()) == 0  # shown once only
    api = client_class_api(secret)
    assert api.get("/api/v1/runs/").status_code == 200
    assert client.post(f"/tokens/{token.pk}/revoke/").status_code == 302
    assert api.get("/api/v1/runs/").status_code == 401


def client_class_api(secret: str):
    from rest_framework.test import APIClient

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    return api

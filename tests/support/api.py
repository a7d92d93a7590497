"""An API client that authenticates as automation does: with a token of a role."""

from __future__ import annotations

from rest_framework.test import APIClient

from storageops.api import tokens


def api(user, role: str) -> APIClient:
    """A client sending `Authorization: Token …` for a new token of `user` with `role`."""
    client = APIClient()
    _, secret = tokens.create_token(user, f"{role} test", role)
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    return client

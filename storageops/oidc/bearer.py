"""The API's check of the provider's access tokens: `Authorization: Bearer <JWT>`.

A site's automation already holds tokens from its IAM; this accepts them when they are JWTs
signed with the provider's keys, issued by it, for our audience, and unexpired. The groups in
the token set the user's roles as a browser sign-in does (accounts.sign_in). StorageOps' own
API tokens (no dots in them) pass straight on to TokenAuthentication.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header

from storageops.oidc import accounts, discovery
from storageops.oidc.tokens import InvalidToken, verify_jwt


@dataclass(frozen=True)
class ProviderToken:
    """request.auth of a request made with a provider's token."""

    claims: dict[str, Any]


def looks_like_jwt(credential: bytes) -> bool:
    return credential.count(b".") == 2


class ProviderTokenAuthentication(BaseAuthentication):
    def authenticate(self, request):
        cfg = discovery.config()
        if cfg is None:
            return None
        parts = get_authorization_header(request).split()
        if len(parts) != 2 or parts[0].lower() != b"bearer" or not looks_like_jwt(parts[1]):
            return None
        try:
            claims = verify_jwt(parts[1].decode(errors="replace"), cfg, audience=cfg.api_audience)
        except InvalidToken as exc:
            raise exceptions.AuthenticationFailed(f"The bearer token is refused: {exc}.") from None
        except discovery.ProviderUnavailable:
            raise exceptions.AuthenticationFailed(
                f"The bearer token cannot be checked: {cfg.provider_name}'s keys cannot be fetched. "
                "Use a StorageOps API token meanwhile."
            ) from None
        user = accounts.sign_in(claims, cfg, how=accounts.BY_BEARER_TOKEN)
        if not user.is_active:
            raise exceptions.AuthenticationFailed("The account of this token is disabled.")
        return user, ProviderToken(claims)

    def authenticate_header(self, request) -> str:
        return 'Bearer realm="api"'


class ProviderTokenScheme(OpenApiAuthenticationExtension):
    target_class = "storageops.oidc.bearer.ProviderTokenAuthentication"
    name = "providerToken"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "JWT",
            "description": "An access token (JWT) from the site's OpenID provider, when single sign-on is set up.",
        }

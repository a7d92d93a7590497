"""The browser's sign-in: mozilla-django-oidc's authorization code flow, told about the provider
through discovery, with the ID token checked by tokens.verify_jwt (signature, issuer, audience,
expiry: the library itself checks neither issuer nor audience) and users matched on (issuer, sub).
"""

from __future__ import annotations

import logging
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import SuspiciousOperation
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.utils import import_from_settings

from storageops.oidc import accounts, discovery
from storageops.oidc.config import SESSION_ISSUER, OidcConfig
from storageops.oidc.tokens import InvalidToken, verify_jwt

logger = logging.getLogger(__name__)

CALLBACK_URL_NAME = "oidc_callback"

_ENDPOINTS = {
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
    "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
    "OIDC_OP_JWKS_ENDPOINT": "jwks_uri",
}


def provider_setting(attr: str, *default: Any) -> Any:
    """What mozilla-django-oidc reads from Django's settings, taken from STORAGEOPS_OIDC and the
    provider's metadata instead, so that one setting (and discovery) configures it all."""
    cfg = discovery.config()
    if cfg is not None:
        if attr in _ENDPOINTS:
            return discovery.metadata(cfg).get(_ENDPOINTS[attr])
        fixed = {
            "OIDC_RP_CLIENT_ID": cfg.client_id,
            "OIDC_RP_CLIENT_SECRET": cfg.client_secret,
            "OIDC_RP_SCOPES": " ".join(cfg.scopes),
            "OIDC_USE_PKCE": True,
            "OIDC_PKCE_CODE_CHALLENGE_METHOD": "S256",
            "OIDC_USE_NONCE": True,
            "OIDC_TIMEOUT": cfg.timeout,
            "OIDC_VERIFY_SSL": True,
            # client_secret_basic: the method every provider must support (RFC 6749, 2.3.1)
            "OIDC_TOKEN_USE_BASIC_AUTH": True,
            "OIDC_STORE_ID_TOKEN": True,
            "OIDC_AUTHENTICATION_CALLBACK_URL": CALLBACK_URL_NAME,
            "OIDC_CREATE_USER": True,
        }
        if attr in fixed:
            return fixed[attr]
    return import_from_settings(attr, *default)


class ProviderBackend(OIDCAuthenticationBackend):
    def __init__(self, *args, **kwargs) -> None:
        # Django builds the backend again for every request of a signed-in user (get_user); the
        # parent would read the provider's endpoints here, i.e. ask the provider on every page.
        self.UserModel = get_user_model()
        self.token_info: dict[str, Any] = {}

    get_settings = staticmethod(provider_setting)

    @property
    def cfg(self) -> OidcConfig:
        cfg = discovery.config()
        if cfg is None:
            raise SuspiciousOperation("single sign-on is not configured")
        return cfg

    @property
    def OIDC_OP_TOKEN_ENDPOINT(self) -> str:
        return provider_setting("OIDC_OP_TOKEN_ENDPOINT")

    @property
    def OIDC_OP_USER_ENDPOINT(self) -> str | None:
        return provider_setting("OIDC_OP_USER_ENDPOINT")

    @property
    def OIDC_RP_CLIENT_ID(self) -> str:
        return self.cfg.client_id

    @property
    def OIDC_RP_CLIENT_SECRET(self) -> str:
        return self.cfg.client_secret

    def authenticate(self, request, **kwargs):
        if discovery.config() is None:
            return None
        user = super().authenticate(request, **kwargs)
        if user is not None:
            request.oidc_session_seconds = self.session_seconds()
        return user

    def get_user(self, user_id):
        # Django's check, which the parent drops: a user an admin deactivated is signed out.
        return ModelBackend.get_user(self, user_id)

    def get_token(self, payload: dict[str, Any]) -> dict[str, Any]:
        self.token_info = super().get_token(payload)
        return self.token_info

    def verify_token(self, token: str, **kwargs) -> dict[str, Any]:
        try:
            claims = verify_jwt(token, self.cfg, audience=self.cfg.client_id)
        except InvalidToken as exc:
            raise SuspiciousOperation(f"the ID token is refused: {exc}") from None
        if claims.get("nonce") != kwargs.get("nonce"):
            raise SuspiciousOperation("the ID token's nonce is not the one this sign-in sent")
        return claims

    def store_tokens(self, access_token: str, id_token: str) -> None:
        super().store_tokens(access_token, id_token)
        self.request.session[SESSION_ISSUER] = self.cfg.issuer

    def get_or_create_user(self, access_token: str, id_token: str, payload: dict[str, Any]):
        claims = dict(payload)
        if self.OIDC_OP_USER_ENDPOINT:
            userinfo = self.get_userinfo(access_token, id_token, payload)
            # OpenID Connect Core 5.3.2: userinfo about another subject must not be used.
            if userinfo.get("sub") != payload.get("sub"):
                raise SuspiciousOperation("the userinfo answer is about another subject")
            claims.update(userinfo)
        return accounts.sign_in(claims, self.cfg)

    def session_seconds(self) -> int:
        """How long the StorageOps session lasts: the setting, or less if the provider's own
        session ends sooner (Keycloak says so in `refresh_expires_in`)."""
        seconds = self.cfg.session_max_age
        provider_says = self.token_info.get("refresh_expires_in")
        if isinstance(provider_says, int) and provider_says > 0:
            seconds = min(seconds, provider_says)
        return seconds

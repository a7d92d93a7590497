"""Checking a JWT from the provider: its signature against the provider's published keys, its
issuer, audience and expiry. The ID token of a browser sign-in and the API's bearer tokens
both pass here."""

from __future__ import annotations

from typing import Any

import jwt

from storageops.oidc import discovery
from storageops.oidc.config import OidcConfig


class InvalidToken(Exception):
    """The token is not one this provider issued for us, now."""


def _signs_with(key: jwt.PyJWK, alg: str) -> bool:
    # PyJWK keeps the published JWK; a key may be for encryption, or name another algorithm.
    published = key._jwk_data
    return published.get("use", "sig") == "sig" and published.get("alg", alg) == alg


def _key_for(header: dict[str, Any], cfg: OidcConfig) -> jwt.PyJWK:
    kid = header.get("kid")
    keyset = discovery.signing_keys(cfg, kid)
    candidates = [key for key in keyset.keys if (kid is None or key.key_id == kid) and _signs_with(key, header["alg"])]
    if not candidates:
        raise InvalidToken(f"signed with a key ({kid or 'no key id'}) that {cfg.issuer} does not publish")
    return candidates[0]


def verify_jwt(token: str, cfg: OidcConfig, *, audience: str) -> dict[str, Any]:
    """The verified claims; InvalidToken says why not (ProviderUnavailable: keys unreachable)."""
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError as exc:
        raise InvalidToken(f"not a JWT: {exc}") from None
    alg = header.get("alg")
    if alg not in cfg.sign_algorithms:
        raise InvalidToken(f"signed with {alg!r}; accepted: {', '.join(cfg.sign_algorithms)}")
    key = _key_for(header, cfg)
    try:
        return jwt.decode(
            token, key.key, algorithms=[alg], audience=audience, issuer=cfg.issuer, leeway=cfg.leeway_seconds,
            options={"require": ["exp", "iss", "sub", "aud"]},
        )  # fmt: skip
    except jwt.ExpiredSignatureError:
        raise InvalidToken("expired") from None
    except jwt.InvalidIssuerError:
        issuer = jwt.decode(token, options={"verify_signature": False}).get("iss")
        raise InvalidToken(f"issued by {issuer!r}, not by {cfg.issuer!r}") from None
    except jwt.InvalidAudienceError:
        raise InvalidToken(f"not meant for this service (its audience is not {audience!r})") from None
    except jwt.PyJWTError as exc:
        raise InvalidToken(str(exc)) from None

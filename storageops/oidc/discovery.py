"""The provider's metadata (`<issuer>/.well-known/openid-configuration`), fetched with a timeout
and kept for an hour in this process; its signing keys (JWKS) for five minutes.

Fetched only when someone signs in, signs out or presents a bearer JWT: a deployment without
single sign-on never gets here. A provider that does not answer raises ProviderUnavailable,
which the pages turn into a clear message beside the local break-glass form.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import jwt
import requests
from django.conf import settings

from storageops.oidc.config import OidcConfig

METADATA_SECONDS = 3600
KEYS_SECONDS = 300
# A key id we do not know makes us fetch the keys again (the provider rotated them), at most this often.
KEYS_REFRESH_FLOOR_SECONDS = 30


class ProviderUnavailable(Exception):
    """The provider did not answer, or answered something that is not its metadata."""


_lock = threading.Lock()
_metadata: dict[str, tuple[float, dict[str, Any]]] = {}
_keys: dict[str, tuple[float, jwt.PyJWKSet]] = {}
# issuer -> (when we last failed, why): what the login page says until a fetch succeeds
_last_failure: dict[str, tuple[float, str]] = {}


def config() -> OidcConfig | None:
    return getattr(settings, "STORAGEOPS_OIDC", None)


def _get_json(url: str, timeout: float) -> dict[str, Any]:
    try:
        response = requests.get(url, timeout=timeout, headers={"Accept": "application/json"})
        response.raise_for_status()
        data = response.json()
    except (requests.RequestException, ValueError) as exc:
        raise ProviderUnavailable(f"{url}: {exc}") from exc
    if not isinstance(data, dict):
        raise ProviderUnavailable(f"{url} did not answer a JSON object")
    return data


def metadata(cfg: OidcConfig, *, fresh: bool = False) -> dict[str, Any]:
    """The discovery document; `fresh` fetches it again (sign-in does: it doubles as a probe)."""
    now = time.monotonic()
    with _lock:
        cached = _metadata.get(cfg.issuer)
    if cached and not fresh and now - cached[0] < METADATA_SECONDS:
        return cached[1]
    try:
        data = _get_json(f"{cfg.issuer.rstrip('/')}/.well-known/openid-configuration", cfg.timeout)
        # OpenID Connect Discovery 1.0, section 4.3: the document must name the issuer we asked, exactly.
        if data.get("issuer") != cfg.issuer:
            raise ProviderUnavailable(f"the provider calls itself {data.get('issuer')!r}, not {cfg.issuer!r}")
        missing = [k for k in ("authorization_endpoint", "token_endpoint", "jwks_uri") if not data.get(k)]
        if missing:
            raise ProviderUnavailable(f"the provider's metadata lacks {', '.join(missing)}")
    except ProviderUnavailable as exc:
        with _lock:
            _last_failure[cfg.issuer] = (time.time(), str(exc))
        raise
    with _lock:
        _metadata[cfg.issuer] = (now, data)
        _last_failure.pop(cfg.issuer, None)
    return data


def last_failure(cfg: OidcConfig) -> str | None:
    """Why the last fetch failed, if the last fetch failed (no network: the login page asks this)."""
    with _lock:
        failure = _last_failure.get(cfg.issuer)
    return failure[1] if failure else None


def signing_keys(cfg: OidcConfig, kid: str | None) -> jwt.PyJWKSet:
    """The provider's keys; fetched again when a token names a key id we have not seen."""
    now = time.monotonic()
    with _lock:
        cached = _keys.get(cfg.issuer)
    if cached:
        fetched, keyset = cached
        known = kid is None or any(key.key_id == kid for key in keyset.keys)
        if now - fetched < KEYS_SECONDS and (known or now - fetched < KEYS_REFRESH_FLOOR_SECONDS):
            return keyset
    data = _get_json(metadata(cfg)["jwks_uri"], cfg.timeout)
    try:
        keyset = jwt.PyJWKSet.from_dict(data)
    except jwt.PyJWTError as exc:
        raise ProviderUnavailable(f"the provider's keys cannot be read: {exc}") from exc
    with _lock:
        _keys[cfg.issuer] = (now, keyset)
    return keyset


def forget() -> None:
    """Drop what is cached (tests that restart a provider)."""
    with _lock:
        _metadata.clear()
        _keys.clear()
        _last_failure.clear()

"""The provider's settings, read from the environment once, when Django's settings load.

No Django import beyond the exception: settings.py imports this module.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured

from storageops.env import env_bool, env_int, env_secret, env_str

ROLE_NAMES = ("viewer", "operator", "admin")
# What a signed-in session keeps: which provider signed it in, and the ID token sign-out hands back.
SESSION_ISSUER = "oidc_issuer"
SESSION_ID_TOKEN = "oidc_id_token"  # noqa: S105 (a session key, the name mozilla-django-oidc uses)
GROUPS_CLAIMS = ("groups", "wlcg.groups", "eduperson_entitlement")


@dataclass(frozen=True)
class OidcConfig:
    issuer: str
    client_id: str
    client_secret: str
    # role -> the provider groups that grant it (any one of them is enough)
    role_map: dict[str, tuple[str, ...]]
    scopes: tuple[str, ...] = ("openid", "profile", "email")
    groups_claim: str = "groups"
    provider_name: str = "single sign-on"
    only: bool = False
    session_max_age: int = 8 * 3600
    timeout: float = 5.0
    # The audience the API's bearer tokens must carry; the client id when unset.
    audience: str = ""
    sign_algorithms: tuple[str, ...] = ("RS256",)
    # How far the provider's clock may be from ours when expiry is checked.
    leeway_seconds: int = 30

    @property
    def api_audience(self) -> str:
        return self.audience or self.client_id


def parse_role_map(raw: str, name: str = "STORAGEOPS_OIDC_ROLE_MAP") -> dict[str, tuple[str, ...]]:
    """'viewer=/storage,operator=/storage/ops,admin=/storage/admins'; a role may repeat."""
    mapping: dict[str, list[str]] = {}
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        role, sep, group = (s.strip() for s in item.partition("="))
        if not sep or not group:
            raise ImproperlyConfigured(f"{name}: {item!r} is not role=group (e.g. operator=/storage/ops)")
        if role not in ROLE_NAMES:
            raise ImproperlyConfigured(f"{name}: unknown role {role!r} in {item!r}; use viewer, operator or admin")
        mapping.setdefault(role, []).append(group)
    if not mapping:
        raise ImproperlyConfigured(f"{name} is empty: map at least one provider group to a role")
    return {role: tuple(groups) for role, groups in mapping.items()}


def from_env() -> OidcConfig | None:
    """The provider's settings, or None when STORAGEOPS_OIDC_ISSUER is unset (no single sign-on)."""
    # Kept exactly as written: tokens must carry this very string (IAM's issuers end with "/").
    issuer = env_str("STORAGEOPS_OIDC_ISSUER", "").strip()
    if not issuer:
        return None
    if not re.match(r"^https?://[^/\s]+", issuer):
        raise ImproperlyConfigured(f"STORAGEOPS_OIDC_ISSUER={issuer!r} must be an http(s) URL")
    client_id = env_str("STORAGEOPS_OIDC_CLIENT_ID", "").strip()
    if not client_id:
        raise ImproperlyConfigured("STORAGEOPS_OIDC_CLIENT_ID must be set when STORAGEOPS_OIDC_ISSUER is")
    secret = env_secret("STORAGEOPS_OIDC_CLIENT_SECRET", "")
    if not secret:
        raise ImproperlyConfigured(
            "STORAGEOPS_OIDC_CLIENT_SECRET (or STORAGEOPS_OIDC_CLIENT_SECRET_FILE) must be set when "
            "STORAGEOPS_OIDC_ISSUER is"
        )
    scopes = tuple(env_str("STORAGEOPS_OIDC_SCOPES", "openid profile email").replace(",", " ").split())
    if "openid" not in scopes:
        raise ImproperlyConfigured(f"STORAGEOPS_OIDC_SCOPES={' '.join(scopes)!r} must include 'openid'")
    groups_claim = env_str("STORAGEOPS_OIDC_GROUPS_CLAIM", "groups").strip()
    if not groups_claim:
        raise ImproperlyConfigured(f"STORAGEOPS_OIDC_GROUPS_CLAIM is empty: use one of {', '.join(GROUPS_CLAIMS)}")
    return OidcConfig(
        issuer=issuer,
        client_id=client_id,
        client_secret=secret,
        role_map=parse_role_map(env_str("STORAGEOPS_OIDC_ROLE_MAP", "")),
        scopes=scopes,
        groups_claim=groups_claim,
        provider_name=env_str("STORAGEOPS_OIDC_PROVIDER_NAME", "single sign-on").strip() or "single sign-on",
        only=env_bool("STORAGEOPS_OIDC_ONLY", False),
        session_max_age=env_int("STORAGEOPS_OIDC_SESSION_MAX_AGE", 8 * 3600, minimum=60, maximum=30 * 86400),
        timeout=env_int("STORAGEOPS_OIDC_TIMEOUT", 5, minimum=1, maximum=60),
        audience=env_str("STORAGEOPS_OIDC_AUDIENCE", "").strip(),
    )


def summary(cfg: OidcConfig | None) -> str:
    """One line on whether sign-on is on, and how: what `make run` prints at start-up."""
    if cfg is None:
        return "Sign-on: off (set STORAGEOPS_OIDC_ISSUER and the rest: docs/security.md)"
    mapping = ", ".join(f"{group} → {role}" for role in ROLE_NAMES for group in cfg.role_map.get(role, ()))
    return f"Sign-on: on, issuer {cfg.issuer} (groups → roles: {mapping}; claim {cfg.groups_claim!r})"

"""From a token's claims to StorageOps roles: the one mapping the browser and the API share.

Providers say "member of" in different shapes, all lists of strings:
- INDIGO IAM's `groups`: "storage", "storage/ops"; its `wlcg.groups` (WLCG profile): "/storage",
  "/storage/ops", with optional roles "/storage/Role=admin";
- Keycloak's group mapper: "/storage/ops" with "full group path" on, "ops" without;
- `eduperson_entitlement`: URNs such as "urn:mace:egi.eu:group:vo.example.org:role=member#aai.egi.eu".
Group paths are compared without their leading slash, so "/storage/ops" in the role map matches
IAM's "storage/ops" and WLCG's "/storage/ops" alike; anything else is compared as written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from storageops.oidc.config import ROLE_NAMES, OidcConfig


def _normal(group: str) -> str:
    return group.strip().lstrip("/")


def groups_in(claims: Mapping[str, Any], claim: str) -> set[str]:
    """The groups a token's claim names. A single string counts as one group (Keycloak sends
    one when a user has one group and the mapper is not multivalued); what is not a string
    inside the list is ignored."""
    value = claims.get(claim)
    items: Iterable[Any] = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    return {item.strip() for item in items if isinstance(item, str) and item.strip()}


def roles_for(groups: Iterable[str], cfg: OidcConfig) -> set[str]:
    """Every role one of the groups is mapped to (a user may hold viewer and operator)."""
    held = {_normal(g) for g in groups}
    return {role for role, mapped in cfg.role_map.items() if any(_normal(g) in held for g in mapped)}


def roles_from_claims(claims: Mapping[str, Any], cfg: OidcConfig) -> set[str]:
    return roles_for(groups_in(claims, cfg.groups_claim), cfg)


def groups_to_ask_for(cfg: OidcConfig) -> list[tuple[str, str]]:
    """(role, group) pairs, lowest role first: what the no-role page tells a user to ask for."""
    return [(role, group) for role in ROLE_NAMES for group in cfg.role_map.get(role, ())]

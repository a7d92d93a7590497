"""The local user of a provider identity, and its roles set from the provider's groups.

Roles follow the provider at every sign-in (browser) and every bearer token (API): the role
groups the mapping gives are added, the others removed, and a change is written to the change
log (the admin's Change records) by "sign-on from <issuer>" (or "bearer token from <issuer>"),
with the roles and the provider's groups before and after. Groups that are not roles are left alone.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from django.contrib.auth.models import Group, User
from django.db import IntegrityError, transaction
from django.utils import timezone

from storageops import changelog, grants, roles
from storageops.models import ExternalIdentity
from storageops.oidc.claims import groups_in, roles_for
from storageops.oidc.config import OidcConfig

CHANGE_VIA = "sso"
# How the provider's groups reached us: what the change record names as the one who changed the roles.
BY_SIGN_ON = "sign-on"
BY_BEARER_TOKEN = "bearer token"  # noqa: S105 (a label, not a token)


def _username(claims: Mapping[str, Any], cfg: OidcConfig) -> str:
    """A readable user name not yet taken: the provider's preferred_username (or the e-mail's
    local part, or the subject), with the provider's host appended if a local account has it."""
    base = str(claims.get("preferred_username") or str(claims.get("email") or "").split("@")[0] or claims["sub"])
    base = re.sub(r"[^\w.@+-]", "_", base)[:100] or "user"
    host = re.sub(r"^https?://", "", cfg.issuer).split("/")[0]
    digest = hashlib.sha256(f"{cfg.issuer} {claims['sub']}".encode()).hexdigest()[:8]
    for candidate in (base, f"{base}@{host}"[:150], f"{base}-{digest}"):
        if not User.objects.filter(username=candidate).exists():
            return candidate
    return f"{base}-{digest}-{ExternalIdentity.objects.count()}"


def identity_for(claims: Mapping[str, Any], cfg: OidcConfig) -> ExternalIdentity:
    """The identity (issuer, sub) and its user, made on first sign-in (with no usable local password)."""
    subject = str(claims["sub"])
    found = ExternalIdentity.objects.select_related("user").filter(issuer=cfg.issuer, subject=subject)
    identity = found.first()
    if identity is not None:
        return identity
    try:
        with transaction.atomic():
            user = User(username=_username(claims, cfg), email=str(claims.get("email") or "")[:254])
            user.first_name = str(claims.get("given_name") or "")[:150]
            user.last_name = str(claims.get("family_name") or "")[:150]
            user.set_unusable_password()
            user.save()
            return ExternalIdentity.objects.create(user=user, issuer=cfg.issuer, subject=subject)
    except IntegrityError:
        # Two first requests of one identity at once (a script's parallel API calls): the other made it.
        return found.get()


def _role_state(user: User) -> dict[str, Any]:
    held = sorted(set(user.groups.filter(name__in=roles.ROLES).values_list("name", flat=True)))
    return {"roles": held, "is_staff": user.is_staff}


def change_actor(cfg: OidcConfig, how: str = BY_SIGN_ON) -> str:
    """Who a change record names for a change of roles from the provider's groups."""
    return f"{how} from {cfg.issuer}"[:150]


def apply_roles(
    user: User,
    wanted: set[str],
    cfg: OidcConfig,
    *,
    how: str = BY_SIGN_ON,
    groups: tuple[list[str], list[str]] | None = None,
) -> bool:
    """Make the user's role groups exactly `wanted`; True if anything changed (and was logged).
    `groups`: the provider's groups as last seen and as now, recorded beside the roles."""
    staff = roles.ADMIN in wanted
    # Checked on every API call with a provider token: the kept grants answer the usual "no
    # change" without a query; a change is read again from the database, which they may trail.
    if grants.of_user(user).groups & set(roles.ROLES) == wanted and user.is_staff == staff:
        return False
    before = _role_state(user)
    if set(before["roles"]) == wanted and before["is_staff"] == staff:
        return False
    with transaction.atomic():
        role_groups = {g.name: g for g in Group.objects.filter(name__in=roles.ROLES)}
        user.groups.remove(*[role_groups[name] for name in before["roles"] if name not in wanted])
        user.groups.add(*[role_groups[name] for name in wanted if name in role_groups])
        # The admin site is part of the admin role, as for local admins.
        if user.is_staff != (roles.ADMIN in wanted):
            user.is_staff = roles.ADMIN in wanted
            user.save(update_fields=["is_staff"])
        after = _role_state(user)
        if groups is not None:
            before["provider_groups"], after["provider_groups"] = groups
        changelog.record_update(user, before, after, via=CHANGE_VIA, actor=change_actor(cfg, how))
    return True


def sign_in(claims: Mapping[str, Any], cfg: OidcConfig, how: str = BY_SIGN_ON) -> User:
    """The user for these verified claims, with its roles set from their groups."""
    identity = identity_for(claims, cfg)
    groups = sorted(groups_in(claims, cfg.groups_claim))
    apply_roles(identity.user, roles_for(groups, cfg), cfg, how=how, groups=(list(identity.groups or []), groups))
    now = timezone.now()
    # The API checks a token on every request: write only what changed, or a minute later.
    if identity.groups != groups or identity.last_seen is None or (now - identity.last_seen).total_seconds() > 60:
        ExternalIdentity.objects.filter(pk=identity.pk).update(groups=groups, last_seen=now)
    return identity.user

"""API tokens: created with a random secret shown once, stored as a SHA-256 hash.

The secret has 256 bits of entropy, so a fast hash is enough (no password stretching);
comparison is constant-time.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import datetime

from django.core.exceptions import ValidationError
from django.utils import timezone

from storageops import grants, roles, row_lookups
from storageops.models import APIToken

PREFIX_LENGTH = 8
_RANK = {roles.VIEWER: 0, roles.OPERATOR: 1, roles.ADMIN: 2}


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def user_role(user) -> str | None:
    """The highest role the user holds (superusers are admins)."""
    if user.is_superuser:
        return roles.ADMIN
    held = grants.of_user(user).groups & set(_RANK)
    return max(held, key=_RANK.__getitem__) if held else None


def create_token(user, name: str, role: str, expires_at: datetime | None = None) -> tuple[APIToken, str]:
    """Returns the token and its plaintext, which is not kept anywhere."""
    if role not in _RANK:
        raise ValidationError({"role": f"Unknown role {role!r}: use viewer, operator or admin."})
    held = user_role(user)
    if held is None or _RANK[role] > _RANK[held]:
        raise ValidationError({"role": f"A token cannot have more rights than its owner ({held or 'no role'})."})
    if expires_at is not None and expires_at <= timezone.now():
        raise ValidationError({"expires_at": "The expiry must be in the future."})
    if not name.strip():
        raise ValidationError({"name": "Give the token a name that says what it is for."})
    secret = secrets.token_urlsafe(32)
    token = APIToken.objects.create(
        user=user, name=name.strip()[:100], role=role, prefix=secret[:PREFIX_LENGTH], key_hash=_hash(secret),
        expires_at=expires_at,
    )  # fmt: skip
    return token, secret


def resolve(secret: str) -> APIToken | None:
    """The live token for a presented secret, or None (unknown, revoked or expired)."""
    token = row_lookups.token_by_prefix(secret[:PREFIX_LENGTH])
    if token is None or not hmac.compare_digest(token.key_hash, _hash(secret)):
        return None
    now = timezone.now()
    if token.revoked_at or (token.expires_at and token.expires_at <= now) or not token.user.is_active:
        return None
    if token.last_used is None or (now - token.last_used).total_seconds() > 60:
        APIToken.objects.filter(pk=token.pk).update(last_used=now)
    return token


def revoke(token: APIToken) -> None:
    APIToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())


def role_permissions(role: str) -> frozenset[str]:
    """What a token of `role` may do (the role's group's permissions, storageops.grants)."""
    return grants.of_role(role)

"""What a user may do (their groups and permissions) and what a role allows, read once and shared.

Every page checks the signed-in user's role and every API request a model permission and, with
a token, its role's permissions: read from PostgreSQL each time, that was four or five queries
a request, the largest single stage of an API request (benchmarks/request_profile.py). A process
now keeps each user's groups and permissions, and each role's permissions, for
STORAGEOPS_GRANTS_SECONDS (5 s; 0: read every time), stamped with the site's grants generation, a
counter in the shared cache (Redis). A change made through Django -- a user's groups or
permissions, a group's permissions, a user or group saved or deleted, a role a sign-on takes
away -- moves the counter on, and every process reads the grants again at its next check: a
role removed is gone everywhere at once. (Kept per process alone, an operator demoted by her
provider still passed operator-only POSTs in other web processes for up to 5 s.) The counter
costs one Redis read a check; with Redis unreachable nothing is kept and each check reads the
database. Whether the user is active or a superuser is never cached: it comes with the user,
read on each request.

`CachedModelBackend` answers `user.has_perm` (templates' `perms`, permission_required, the API's
permission class) from these; Django's ModelBackend stays listed after it for the sessions it
signed in, and answers only what this one denies.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import Group, Permission
from django.core.cache import caches
from django.core.exceptions import PermissionDenied
from django.db.models import Q

from storageops import row_lookups

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Grants:
    groups: frozenset[str]
    permissions: frozenset[str]  # "app_label.codename"


_lock = threading.Lock()
# Each kept entry: (expiry on this process's monotonic clock, the generation it was read in, value).
_users: dict[int, tuple[float, int, Grants]] = {}
_roles: dict[str, tuple[float, int, frozenset[str]]] = {}
_GENERATION = "grants:generation"


def generation() -> int | None:
    """The site's grants generation (moved on by every change); None when the shared cache cannot
    be read, and then nothing may be kept."""
    try:
        return int(caches["shared"].get_or_set(_GENERATION, 0, timeout=None))
    except Exception:  # noqa: BLE001 -- whatever Redis raises, the answer is read from the database
        return None


def _next_generation() -> None:
    try:
        shared = caches["shared"]
        shared.add(_GENERATION, 0, timeout=None)
        shared.incr(_GENERATION)
    except Exception as exc:  # noqa: BLE001 -- the change is made; other processes' entries expire on their own
        log.warning("grants generation not moved on (the shared cache: %s): other processes keep theirs "
                    "up to STORAGEOPS_GRANTS_SECONDS", exc)  # fmt: skip


def _seconds() -> float:
    return float(getattr(settings, "STORAGEOPS_GRANTS_SECONDS", 5))


def _labels(permissions) -> frozenset[str]:
    return frozenset(f"{app}.{code}" for app, code in permissions.values_list("content_type__app_label", "codename"))


def of_user(user) -> Grants:
    """The groups and permissions (its own and its groups') of a saved user."""
    now, current = time.monotonic(), generation()
    hit = _users.get(user.pk)
    if hit is not None and hit[0] > now and hit[1] == current:
        return hit[2]
    grants = Grants(
        groups=frozenset(user.groups.values_list("name", flat=True)),
        permissions=_labels(Permission.objects.filter(Q(group__user=user) | Q(user=user)).distinct()),
    )
    if (ttl := _seconds()) > 0 and current is not None:
        with _lock:
            _users[user.pk] = (now + ttl, current, grants)
    return grants


def of_role(role: str) -> frozenset[str]:
    """The permissions of the group named `role` (none where there is no such group)."""
    now, current = time.monotonic(), generation()
    hit = _roles.get(role)
    if hit is not None and hit[0] > now and hit[1] == current:
        return hit[2]
    group = Group.objects.filter(name=role).first()
    permissions = _labels(group.permissions.all()) if group is not None else frozenset()
    if (ttl := _seconds()) > 0 and current is not None:
        with _lock:
            _roles[role] = (now + ttl, current, permissions)
    return permissions


def forget(**_kwargs) -> None:
    """Clear every kept grant, here and, by the generation, in every process (a signal receiver:
    any change to users, groups or permissions)."""
    with _lock:
        _users.clear()
        _roles.clear()
    _next_generation()


class CachedModelBackend(ModelBackend):
    """Django's ModelBackend, its permissions read through of_user() and the session's user
    found by a statement made once (storageops.row_lookups), not compiled on every page."""

    def get_user(self, user_id):
        user = row_lookups.user_by_pk(user_id)
        return user if user is not None and self.user_can_authenticate(user) else None

    def get_all_permissions(self, user_obj, obj=None):
        if not self._answers(user_obj, obj):
            return super().get_all_permissions(user_obj, obj)
        return set(of_user(user_obj).permissions)

    def has_perm(self, user_obj, perm, obj=None):
        """Granted or denied here, for good: Django asks every listed backend until one grants,
        and ModelBackend (listed after, and OIDC's, a ModelBackend too) would read the very rows
        of_user() holds from the database again -- two queries on every page that checks a
        permission its viewer lacks (the run page's Cancel and Retry for a viewer)."""
        if not self._answers(user_obj, obj):
            return super().has_perm(user_obj, perm, obj)
        if perm in of_user(user_obj).permissions:
            return True
        raise PermissionDenied

    @staticmethod
    def _answers(user_obj, obj) -> bool:
        # A saved, active user's own permissions; superusers and per-object checks go to Django.
        return user_obj.is_active and not user_obj.is_anonymous and obj is None and not user_obj.is_superuser


def connect_signals() -> None:
    """Clear the kept grants on every change Django's signals report (storageops' ready())."""
    from django.contrib.auth import get_user_model
    from django.db.models.signals import m2m_changed, post_delete, post_save

    user = get_user_model()
    for through in (user.groups.through, user.user_permissions.through, Group.permissions.through):
        m2m_changed.connect(forget, sender=through, dispatch_uid=f"grants-forget-{through.__name__}")
    for model in (user, Group, Permission):
        post_save.connect(forget, sender=model, dispatch_uid=f"grants-forget-save-{model.__name__}")
        post_delete.connect(forget, sender=model, dispatch_uid=f"grants-forget-delete-{model.__name__}")

"""What a user may do (their groups and permissions) and what a role allows, read once and shared.

Every page checks the signed-in user's role and every API request a model permission and, with
a token, its role's permissions: read from PostgreSQL each time, that was four or five queries
a request, the largest single stage of an API request (benchmarks/request_profile.py). A process
now keeps each user's groups and permissions, and each role's permissions, for
STORAGEOPS_GRANTS_SECONDS (5 s; 0: read every time). A change made through Django -- a user's
groups or permissions, a group's permissions, a user or group saved or deleted -- clears them at
once in the process that made it; every other process sees it within those seconds. Whether the
user is active or a superuser is never cached: it comes with the user, read on each request.

`CachedModelBackend` answers `user.has_perm` (templates' `perms`, permission_required, the API's
permission class) from these; Django's ModelBackend stays listed after it for the sessions it
signed in, and answers only what this one denies.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import Group, Permission
from django.db.models import Q

from storageops import row_lookups


@dataclass(frozen=True)
class Grants:
    groups: frozenset[str]
    permissions: frozenset[str]  # "app_label.codename"


_lock = threading.Lock()
_users: dict[int, tuple[float, Grants]] = {}
_roles: dict[str, tuple[float, frozenset[str]]] = {}


def _seconds() -> float:
    return float(getattr(settings, "STORAGEOPS_GRANTS_SECONDS", 5))


def _labels(permissions) -> frozenset[str]:
    return frozenset(f"{app}.{code}" for app, code in permissions.values_list("content_type__app_label", "codename"))


def of_user(user) -> Grants:
    """The groups and permissions (its own and its groups') of a saved user."""
    now = time.monotonic()
    hit = _users.get(user.pk)
    if hit is not None and hit[0] > now:
        return hit[1]
    grants = Grants(
        groups=frozenset(user.groups.values_list("name", flat=True)),
        permissions=_labels(Permission.objects.filter(Q(group__user=user) | Q(user=user)).distinct()),
    )
    if (ttl := _seconds()) > 0:
        with _lock:
            _users[user.pk] = (now + ttl, grants)
    return grants


def of_role(role: str) -> frozenset[str]:
    """The permissions of the group named `role` (none where there is no such group)."""
    now = time.monotonic()
    hit = _roles.get(role)
    if hit is not None and hit[0] > now:
        return hit[1]
    group = Group.objects.filter(name=role).first()
    permissions = _labels(group.permissions.all()) if group is not None else frozenset()
    if (ttl := _seconds()) > 0:
        with _lock:
            _roles[role] = (now + ttl, permissions)
    return permissions


def forget(**_kwargs) -> None:
    """Clear every kept grant (a signal receiver: any change to users, groups or permissions)."""
    with _lock:
        _users.clear()
        _roles.clear()


class CachedModelBackend(ModelBackend):
    """Django's ModelBackend, its permissions read through of_user() and the session's user
    found by a statement made once (storageops.row_lookups), not compiled on every page."""

    def get_user(self, user_id):
        user = row_lookups.user_by_pk(user_id)
        return user if user is not None and self.user_can_authenticate(user) else None

    def get_all_permissions(self, user_obj, obj=None):
        if not user_obj.is_active or user_obj.is_anonymous or obj is not None or user_obj.is_superuser:
            return super().get_all_permissions(user_obj, obj)
        return set(of_user(user_obj).permissions)


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

"""A user's groups and permissions, and a role's, are read once and shared for a few seconds
(storageops.grants): no queries for them on the next request, a change made through Django seen
at once, one made behind its back (another process, raw SQL) within STORAGEOPS_GRANTS_SECONDS."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from storageops import grants
from storageops.api import tokens

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh():
    grants.forget()
    yield
    grants.forget()


def _operator() -> User:
    user = User.objects.create_user("op-grants", password="x" * 12)
    user.groups.add(Group.objects.get(name="operator"))
    return User.objects.get(pk=user.pk)  # a fresh object: no per-object permission cache


def test_the_second_check_asks_the_database_nothing():
    user = _operator()
    assert user.has_perm("campaigns.start_run") and tokens.user_role(user) == "operator"
    again = User.objects.get(pk=user.pk)
    with CaptureQueriesContext(connection) as queries:
        assert again.has_perm("campaigns.start_run") and tokens.user_role(again) == "operator"
        assert "campaigns.view_run" in tokens.role_permissions("operator")
        assert "campaigns.view_run" in tokens.role_permissions("operator")
    # role_permissions' first read is one group and its permissions; the user's were kept.
    assert len(queries) <= 2, [q["sql"] for q in queries]


def test_a_role_taken_away_through_django_is_refused_at_once():
    user = _operator()
    assert User.objects.get(pk=user.pk).has_perm("campaigns.start_run")
    user.groups.remove(Group.objects.get(name="operator"))
    fresh = User.objects.get(pk=user.pk)
    assert not fresh.has_perm("campaigns.start_run") and tokens.user_role(fresh) is None
    # And a permission taken from a role's group, for the tokens of that role.
    assert "campaigns.start_run" in tokens.role_permissions("operator")
    Group.objects.get(name="operator").permissions.remove(Permission.objects.get(codename="start_run"))
    assert "campaigns.start_run" not in tokens.role_permissions("operator")


def test_a_change_behind_djangos_back_is_seen_within_the_grants_seconds(settings):
    settings.STORAGEOPS_GRANTS_SECONDS = 1
    user = _operator()
    assert User.objects.get(pk=user.pk).has_perm("campaigns.start_run")
    # Another process (or raw SQL) takes the role: no signal reaches this one.
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM auth_user_groups WHERE user_id = %s", [user.pk])
    assert User.objects.get(pk=user.pk).has_perm("campaigns.start_run")  # kept for now
    time.sleep(1.1)
    assert not User.objects.get(pk=user.pk).has_perm("campaigns.start_run")


@pytest.mark.django_db(transaction=True)
def test_a_role_taken_away_in_another_process_is_refused_here_at_once(settings):
    """A sign-on that demotes a user is handled by one web process; the others kept her grants
    and let operator-only POSTs through for up to 5 s. The other process here is a real one, on
    the same database and Redis: its change moves the shared generation on."""
    settings.STORAGEOPS_GRANTS_SECONDS = 3600
    user = _operator()
    assert User.objects.get(pk=user.pk).has_perm("campaigns.start_run")  # kept here, for an hour
    db = connection.settings_dict
    script = textwrap.dedent(
        f"""
        import django
        django.setup()
        from django.contrib.auth.models import Group, User
        User.objects.get(pk={user.pk}).groups.remove(Group.objects.get(name="operator"))
        """
    )
    url = f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
    subprocess.run([sys.executable, "-c", script], check=True, env={**os.environ, "DATABASE_URL": url}, timeout=120)
    fresh = User.objects.get(pk=user.pk)
    assert not fresh.has_perm("campaigns.start_run") and tokens.user_role(fresh) is None


def test_nothing_is_kept_with_zero_seconds(settings):
    settings.STORAGEOPS_GRANTS_SECONDS = 0
    user = _operator()
    assert User.objects.get(pk=user.pk).has_perm("campaigns.start_run")
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM auth_user_groups WHERE user_id = %s", [user.pk])
    assert not User.objects.get(pk=user.pk).has_perm("campaigns.start_run")


def test_an_inactive_or_superuser_flag_is_never_taken_from_the_kept_grants():
    user = _operator()
    assert User.objects.get(pk=user.pk).has_perm("campaigns.start_run")
    User.objects.filter(pk=user.pk).update(is_active=False)  # no signal: a bulk update
    assert not User.objects.get(pk=user.pk).has_perm("campaigns.start_run")


def test_an_api_request_with_a_token_asks_no_role_query_the_second_time():
    user = _operator()
    _, secret = tokens.create_token(user, "grants", "operator")
    client = Client(HTTP_AUTHORIZATION=f"Token {secret}")
    assert client.get("/api/v1/campaigns/").status_code == 200
    with CaptureQueriesContext(connection) as queries:
        assert client.get("/api/v1/campaigns/").status_code == 200
    sql = " ".join(q["sql"] for q in queries)
    assert "auth_group" not in sql and "auth_permission" not in sql, sql


def test_a_denied_permission_asks_the_database_nothing_either():
    """A viewer's run page checks Cancel and Retry, which a viewer lacks: the denial comes from the
    kept grants too, not from ModelBackend (listed after) reading the same rows again (issue 46)."""
    viewer = User.objects.create_user("viewer-grants", password="x" * 12)
    viewer.groups.add(Group.objects.get(name="viewer"))
    assert not User.objects.get(pk=viewer.pk).has_perm("campaigns.cancel_run")
    again = User.objects.get(pk=viewer.pk)
    with CaptureQueriesContext(connection) as queries:
        assert not again.has_perm("campaigns.cancel_run") and not again.has_perm("campaigns.start_run")
        assert again.has_perm("campaigns.view_run")
    assert len(queries) == 0, [q["sql"] for q in queries]
    # A superuser is still granted everything.
    boss = User.objects.create_superuser("boss-grants", password="x" * 12)
    assert boss.has_perm("campaigns.cancel_run")

"""The per-request lookups made by SQL built once: the same models the ORM makes, and the same
refusals (unknown token, revoked token, inactive user, a session holding garbage)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User
from django.utils import timezone

from storageops import row_lookups
from storageops.api import tokens
from storageops.grants import CachedModelBackend
from storageops.models import APIToken

pytestmark = pytest.mark.django_db


def _fields(obj) -> list:
    return [getattr(obj, f.attname) for f in obj._meta.concrete_fields]


@pytest.fixture
def operator() -> User:
    user = User.objects.create_user("olga", password="x" * 12, email="o@example.org")
    user.groups.add(Group.objects.get_or_create(name="operator")[0])
    return user


def test_token_and_user_are_what_the_orm_reads(operator):
    token, secret = tokens.create_token(operator, "ansible", "viewer")
    found = row_lookups.token_by_prefix(token.prefix)
    orm = APIToken.objects.select_related("user").get(prefix=token.prefix)
    assert _fields(found) == _fields(orm) and _fields(found.user) == _fields(orm.user)
    assert not found._state.adding and found._state.db == orm._state.db
    assert tokens.resolve(secret).pk == token.pk
    assert row_lookups.token_by_prefix("nothere0") is None
    assert tokens.resolve("nothere0" + secret[8:]) is None
    tokens.revoke(token)
    assert tokens.resolve(secret) is None


def test_a_token_of_a_user_made_inactive_is_refused(operator):
    _, secret = tokens.create_token(operator, "cron", "viewer")
    User.objects.filter(pk=operator.pk).update(is_active=False)
    assert tokens.resolve(secret) is None


def test_the_session_user_is_found_and_refused_as_modelbackend_does(operator):
    backend = CachedModelBackend()
    assert _fields(backend.get_user(operator.pk)) == _fields(User.objects.get(pk=operator.pk))
    assert backend.get_user(str(operator.pk)).pk == operator.pk  # sessions keep the key as text
    assert backend.get_user(operator.pk + 1000) is None
    assert backend.get_user("not-a-number") is None
    User.objects.filter(pk=operator.pk).update(is_active=False, last_login=timezone.now())
    assert backend.get_user(operator.pk) is None


def test_a_page_reads_its_session_and_an_expired_one_signs_out(client, operator):
    from datetime import timedelta

    from django.contrib.sessions.models import Session

    client.force_login(operator)
    assert client.get("/campaigns/runs/").status_code == 200
    Session.objects.update(expire_date=timezone.now() - timedelta(seconds=1))
    response = client.get("/campaigns/runs/")
    assert response.status_code == 302 and "/login" in response["Location"]


def test_some_fields_of_a_row_are_what_the_orm_reads_and_the_rest_deferred():
    """Named out of the model's order, with a JSON field and times among them (the run page's
    progress poll reads a run so)."""
    from campaigns.models import Run
    from campaigns.runs import create_run
    from tests.support.factories import mock_campaign

    run = create_run(mock_campaign("some-fields"), trigger="command")
    Run.objects.filter(pk=run.pk).update(
        state="running", files_done=7, throughput_bps=1.5e6, heartbeat_at=timezone.now(),
        summary={"total": {"files_ok": 7, "note": "ünïcode"}},
    )  # fmt: skip
    names = ("summary", "heartbeat_at", "id", "files_done", "state", "throughput_bps", "campaign")
    found = row_lookups.some_fields(Run, run.pk, names)
    orm = Run.objects.get(pk=run.pk)
    for name in names:
        field = Run._meta.get_field(name)
        assert getattr(found, field.attname) == getattr(orm, field.attname), name
    assert found.summary == {"total": {"files_ok": 7, "note": "ünïcode"}}
    assert "planned_files" in found.get_deferred_fields() and "summary" not in found.get_deferred_fields()
    assert found.planned_files == orm.planned_files, "a deferred field is read when touched"
    assert row_lookups.some_fields(Run, run.pk + 10_000, names) is None

"""After a flush, the rows replayed from the copy (tests/support/flush_snapshot.py) are the rows
post_migrate's receivers write: content types, permissions, the roles' groups and their
permissions, the built-in beat schedules."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.core.management.commands import flush
from django.core.management.sql import emit_post_migrate_signal
from django_celery_beat.models import PeriodicTask

pytestmark = pytest.mark.django_db(transaction=True)


def _what_post_migrate_made() -> dict:
    return {
        "content types": set(ContentType.objects.values_list("app_label", "model")),
        "permissions": set(Permission.objects.values_list("content_type__app_label", "codename", "name")),
        "groups": {g.name: set(g.permissions.values_list("codename", flat=True)) for g in Group.objects.all()},
        "schedules": set(
            PeriodicTask.objects.values_list("name", "task", "interval__every", "interval__period", "queue", "enabled")
        ),
    }


def test_the_rows_replayed_after_a_flush_are_the_rows_post_migrate_writes():
    assert flush.emit_post_migrate_signal is not emit_post_migrate_signal  # the replay is installed
    call_command("flush", verbosity=0, interactive=False)
    call_command("flush", verbosity=0, interactive=False)  # the second at least is replayed
    replayed = _what_post_migrate_made()
    # A role changed by a test is put back by the next flush, as by the signal.
    Group.objects.filter(name__in=replayed["groups"]).first().permissions.clear()

    call_command("flush", verbosity=0, interactive=False, inhibit_post_migrate=True)
    assert not ContentType.objects.exists() and not Group.objects.exists()
    emit_post_migrate_signal(0, False, "default")
    emitted = _what_post_migrate_made()

    assert replayed == emitted
    assert replayed["groups"] and all(replayed["groups"].values()) and replayed["schedules"]
    # The cache of content types holds the ids the rows have now.
    ContentType.objects.clear_cache()
    call_command("flush", verbosity=0, interactive=False)
    model = ContentType.objects.get_for_model(Group)
    assert ContentType.objects.filter(pk=model.pk, model="group").exists()

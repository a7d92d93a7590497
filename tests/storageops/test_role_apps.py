"""The roles hold the permissions of every app of the project, an engine's app too, which no
list names, and of no library's app."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from storageops import roles


def test_every_app_of_the_project_and_no_library_is_a_role_app():
    labels = set(roles.role_apps())
    assert {"campaigns", "fts", "gfal2", "xrootd", "collectors", "alerts", "storageops", "django_celery_beat"} <= labels
    assert not labels & {"auth", "contenttypes", "sessions", "admin", "rest_framework", "csp", "django_filters"}


@pytest.mark.django_db
def test_an_engine_apps_models_are_in_the_roles():
    def held(group: str) -> set[str]:
        perms = Group.objects.get(name=group).permissions.filter(content_type__app_label="fts")
        return set(perms.values_list("codename", flat=True))

    assert "view_ftsinstance" in held(roles.VIEWER) and "change_ftsinstance" not in held(roles.VIEWER)
    assert "view_ftsinstance" in held(roles.OPERATOR) and "change_ftsinstance" not in held(roles.OPERATOR)
    assert {"add_ftsinstance", "change_ftsinstance", "delete_ftsinstance"} <= held(roles.ADMIN)

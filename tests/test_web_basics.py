"""Login everywhere but the login page and /healthz; health reports the real services."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from storageops import roles

pytestmark = pytest.mark.django_db


def test_healthz_reports_database_and_broker(client):
    response = client.get("/healthz")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "ok"
    assert body["database"]["ok"] is True
    assert body["broker"]["ok"] is True


@pytest.mark.parametrize("path", ["/", "/campaigns/", "/campaigns/runs/", "/hosts/", "/hosts/events/"])
def test_pages_need_a_login(client, path):
    response = client.get(path)
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


def test_login_page_is_public(client):
    assert client.get("/login/").status_code == 200


@pytest.mark.parametrize(
    "path", ["/", "/campaigns/", "/campaigns/runs/", "/campaigns/backends/", "/hosts/", "/hosts/events/"]
)
def test_pages_render_for_a_viewer(client, viewer, path):
    client.force_login(viewer)
    assert client.get(path).status_code == 200


def test_roles_exist_with_their_permissions():
    perms = {
        g.name: {f"{p.content_type.app_label}.{p.codename}" for p in g.permissions.all()}
        for g in Group.objects.filter(name__in=roles.ROLES)
    }
    assert set(perms) == set(roles.ROLES)
    assert "campaigns.view_run" in perms["viewer"]
    assert "campaigns.start_run" not in perms["viewer"]
    assert {"campaigns.start_run", "campaigns.cancel_run", "collectors.add_event"} <= perms["operator"]
    assert "campaigns.change_campaign" not in perms["operator"]
    assert {"campaigns.change_campaign", "collectors.change_host", "campaigns.delete_backend"} <= perms["admin"]


def test_permissions_follow_the_role(viewer, operator, admin_user):
    assert not viewer.has_perm("campaigns.start_run")
    assert operator.has_perm("campaigns.start_run") and not operator.has_perm("campaigns.change_backend")
    assert admin_user.has_perm("campaigns.change_backend")

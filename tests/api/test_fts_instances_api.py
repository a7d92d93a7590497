"""FTS instances through the API and the admin: validated, role-guarded, secrets write-only."""

from __future__ import annotations

import pytest
from django.test import Client

from campaigns.runs.engines.fts.models import FtsInstance
from tests.support.api import api

pytestmark = pytest.mark.django_db
SECRET = "eyJFTSSECRETTOKEN"


def test_fts_instance_api_validates_guards_and_never_returns_the_token(admin_user, viewer):
    admin = api(admin_user, "admin")
    bad = admin.post("/api/v1/fts-instances/", {"name": "cern", "rest_url": "ftp://fts3.cern.ch",
                                                "ca_path": "certs", "files_per_job": 0}, format="json")  # fmt: skip
    assert bad.status_code == 400
    assert set(bad.json()["error"]["fields"]) == {"rest_url", "ca_path", "files_per_job"}
    assert api(viewer, "viewer").post("/api/v1/fts-instances/", {"name": "x"}, format="json").status_code == 403
    body = {"name": "cern", "rest_url": "https://fts3-pilot.cern.ch:8446", "bearer_token": SECRET,
            "ca_path": "/etc/grid-security/certificates", "manage_link_limits": True}  # fmt: skip
    created = admin.post("/api/v1/fts-instances/", body, format="json")
    assert created.status_code == 201, created.content
    data = created.json()
    assert data["has_token"] is True and data["auth_kind"] == "token" and data["verify_tls"] is True
    pk = data["id"]
    # An update that does not mention the token keeps it.
    assert admin.patch(f"/api/v1/fts-instances/{pk}/", {"files_per_job": 200}, format="json").status_code == 200
    assert FtsInstance.objects.get(pk=pk).bearer_token == SECRET
    for path in ("/api/v1/fts-instances/", f"/api/v1/fts-instances/{pk}/", "/api/schema/"):
        response = api(viewer, "viewer").get(path)
        assert response.status_code == 200 and SECRET not in response.content.decode(), path


def test_admin_form_keeps_the_token_write_only(admin_user):
    obj = FtsInstance.objects.create(name="site-fts", url="https://fts.example.org:8446", bearer_token=SECRET)
    client = Client()
    client.force_login(admin_user)
    page = client.get(f"/admin/fts/ftsinstance/{obj.pk}/change/")
    assert page.status_code == 200 and SECRET not in page.content.decode()
    form = {"name": "site-fts", "url": "https://fts.example.org:8446", "bearer_token": "", "verify_tls": "on",
            "files_per_job": 50, "poll_seconds": 2.0}  # fmt: skip
    saved = client.post(f"/admin/fts/ftsinstance/{obj.pk}/change/", form)
    assert saved.status_code == 302, saved.content.decode()[:2000]
    obj.refresh_from_db()
    assert obj.bearer_token == SECRET and obj.files_per_job == 50
    client.post(f"/admin/fts/ftsinstance/{obj.pk}/change/", {**form, "clear_bearer_token": "on"})
    obj.refresh_from_db()
    assert obj.bearer_token == ""


def test_changes_to_an_fts_instance_are_recorded_without_the_secret(admin_user):
    from storageops.models import ChangeRecord

    admin = api(admin_user, "admin")
    created = admin.post("/api/v1/fts-instances/", {"name": "rec", "rest_url": "https://fts.example.org:8446",
                                                    "bearer_token": SECRET}, format="json")  # fmt: skip
    assert created.status_code == 201
    records = ChangeRecord.objects.filter(object_type="fts.ftsinstance", object_id=created.json()["id"])
    assert records.count() == 1 and records.first().via == "api"
    assert SECRET not in str([(r.before, r.after, r.changes) for r in records])


def test_admin_refuses_to_delete_an_instance_a_campaign_uses(admin_user, tmp_path):
    """The campaign names its instance in engine_options, not by a foreign key: the admin's delete
    page and its bulk action must still show it as protected and delete nothing (not a 500)."""
    from tests.support.factories import campaign, endpoint

    used = FtsInstance.objects.create(name="used-fts", url="https://fts.example.org:8446")
    spare = FtsInstance.objects.create(name="spare-fts", url="https://fts2.example.org:8446")
    src, dst = endpoint("adm-src", f"file://{tmp_path}/a/"), endpoint("adm-dst", f"file://{tmp_path}/b/")
    campaign("uses-fts", [src], [dst], engine="fts", engine_options={"instance": used.pk})
    client = Client()
    client.force_login(admin_user)
    page = client.post(f"/admin/fts/ftsinstance/{used.pk}/delete/", {"post": "yes"})
    assert page.status_code == 200 and "Campaign: uses-fts" in page.content.decode()
    bulk = client.post(
        "/admin/fts/ftsinstance/",
        {"action": "delete_selected", "_selected_action": [used.pk, spare.pk], "post": "yes"},
    )
    assert bulk.status_code == 200 and "Campaign: uses-fts" in bulk.content.decode()
    assert set(FtsInstance.objects.values_list("name", flat=True)) == {"used-fts", "spare-fts"}
    gone = client.post(f"/admin/fts/ftsinstance/{spare.pk}/delete/", {"post": "yes"})
    assert gone.status_code == 302 and not FtsInstance.objects.filter(pk=spare.pk).exists()

"""Every create, update and delete of a Backend, Endpoint, Host or Campaign leaves a change
record with who, when, through what, and the values before and after."""

from __future__ import annotations

import pytest

from campaigns.models import Backend, Endpoint
from collectors.models import Host
from storageops.context import acting_as
from storageops.models import ChangeRecord
from tests.support.factories import campaign, endpoint

pytestmark = pytest.mark.django_db


def records(obj) -> list[ChangeRecord]:
    label = f"{obj._meta.app_label}.{obj._meta.model_name}"
    return list(ChangeRecord.objects.filter(object_type=label, object_id=obj.pk).order_by("pk"))


def test_editing_a_backend_in_the_admin_records_who_and_what(client, admin_user):
    backend = Backend.objects.create(name="dcache-zfs", access_layer="dcache", access_version="9.2.1")
    client.force_login(admin_user)
    form = {
        "name": "dcache-zfs", "access_layer": "dcache", "access_version": "9.2.22", "unified_layer": "dCache pools",
        "unified_version": "", "storage_layer": "ZFS 10x10", "storage_version": "", "notes": "",
    }  # fmt: skip
    response = client.post(f"/admin/campaigns/backend/{backend.pk}/change/", form)
    assert response.status_code == 302, response.content[:2000]
    change = records(backend)[-1]
    assert change.action == "update"
    assert change.user == admin_user and change.user_name == "ada-admin"
    assert change.via == "web" and change.request_id
    assert change.changes == {
        "access_version": ["9.2.1", "9.2.22"],
        "storage_layer": ["", "ZFS 10x10"],
        "unified_layer": ["", "dCache pools"],
    }
    assert change.before["access_version"] == "9.2.1" and change.after["access_version"] == "9.2.22"


def test_create_and_delete_from_a_command_context():
    with acting_as(via="command"):
        host = Host.objects.create(name="door9", address="10.0.0.9")
    created = records(host)[0]
    assert (created.action, created.via, created.user) == ("create", "command", None)
    assert created.after["address"] == "10.0.0.9" and created.before is None
    pk = host.pk
    host.delete()
    deleted = ChangeRecord.objects.filter(object_type="collectors.host", object_id=pk).order_by("pk").last()
    assert deleted.action == "delete" and deleted.before["name"] == "door9" and deleted.after is None


def test_saving_without_a_change_records_nothing():
    backend = Backend.objects.create(name="eos", access_layer="eos")
    count = len(records(backend))
    backend.save()
    assert len(records(backend)) == count


def test_many_to_many_changes_are_recorded():
    src = endpoint("src-a", "root://door1:1094//data/")
    dst = endpoint("dst-b", "root://door2:1094//data/")
    obj = campaign("m2m", [src], [src])
    obj.destinations.set([dst])
    removed, added = records(obj)[-2:]  # set() removes, then adds
    assert removed.changes == {"destinations": [[src.pk], []]}
    assert added.changes == {"destinations": [[], [dst.pk]]}


def test_secrets_are_never_copied_into_the_log():
    ep = endpoint("tokened", "davs://door2:2880/data/", bearer_token="eyJhbGciOiJSUzI1NiJ9.secret")
    ep.bearer_token = "eyJhbGciOiJSUzI1NiJ9.other"
    ep.save()
    for change in records(Endpoint.objects.get(pk=ep.pk)):
        text = str(change.before) + str(change.after) + str(change.changes)
        assert "eyJ" not in text
    assert records(ep)[0].after["bearer_token"] == "(secret)"

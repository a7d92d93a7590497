"""A client pool's rules without processes: how a step is split, what a pool may hold, and
what its snapshot freezes."""

from __future__ import annotations

import pytest

from campaigns.runs import planning
from campaigns.runs.client_pool.shares import split
from campaigns.runs.engines.fts.models import FtsInstance
from campaigns.spec import ClientSpec, RunSpec
from collectors.models import Host
from tests.support.api import api
from tests.support.factories import mock_campaign


@pytest.mark.parametrize(
    ("concurrency", "weights", "expected"),
    [
        (6, {"c1": 1, "c2": 1, "c3": 1}, {"c1": 2, "c2": 2, "c3": 2}),
        (7, {"c1": 1, "c2": 1, "c3": 1}, {"c1": 3, "c2": 2, "c3": 2}),
        (1, {"c1": 1, "c2": 1, "c3": 1}, {"c1": 1, "c2": 0, "c3": 0}),
        (8, {"big": 3, "small": 1}, {"big": 6, "small": 2}),
        (5, {"big": 3, "small": 1}, {"big": 4, "small": 1}),
        (6, {"c1": 1, "c3": 1}, {"c1": 3, "c3": 3}),
        (3, {}, {}),
    ],
)
def test_a_step_is_split_by_weight_and_the_shares_add_up(concurrency, weights, expected):
    shares = split(concurrency, weights)
    assert shares == expected
    assert sum(shares.values()) == (concurrency if weights else 0)


@pytest.mark.django_db
def test_the_snapshot_freezes_the_pool_and_its_weights():
    obj = mock_campaign("pooled-snap")
    obj.clients.set([Host.objects.create(name="wn2", role="client", client_weight=3),
                     Host.objects.create(name="wn1", role="client")])  # fmt: skip
    snapshot = planning.campaign_snapshot(obj)
    assert snapshot["clients"] == [{"name": "wn1", "weight": 1}, {"name": "wn2", "weight": 3}]
    assert RunSpec.from_snapshot(snapshot).clients == (ClientSpec("wn1", 1), ClientSpec("wn2", 3))
    assert "clients" not in snapshot["parameters"]
    # A run frozen before pools existed has none: one worker copies, as it did.
    assert RunSpec.from_snapshot({k: v for k, v in snapshot.items() if k != "clients"}).clients == ()


@pytest.mark.django_db
def test_the_api_refuses_a_pool_of_doors_or_under_fts_naming_the_field(admin_user):
    client = api(admin_user, "admin")
    made_for = mock_campaign("pool-api")
    source, destination = made_for.sources.get(), made_for.destinations.get()
    door = Host.objects.create(name="door7", role="door")
    worker_node = Host.objects.create(name="wn7", role="client")
    fts = FtsInstance.objects.create(name="fts-a", url="https://fts.example.org:8446")
    body = {"name": "pooled-api", "sources": [source.pk], "destinations": [destination.pk], "concurrency_steps": [2]}

    refused = client.post("/api/v1/campaigns/", {**body, "clients": [door.pk]}, format="json")
    assert refused.status_code == 400 and "door7" in str(refused.json()["error"]["fields"]["clients"]), refused.content
    refused = client.post(
        "/api/v1/campaigns/",
        {**body, "clients": [worker_node.pk], "engine": "fts", "engine_options": {"instance": fts.pk}},
        format="json",
    )  # fmt: skip
    assert refused.status_code == 400 and "gfal2" in str(refused.json()["error"]["fields"]["clients"]), refused.content

    made = client.post("/api/v1/campaigns/", {**body, "clients": [worker_node.pk]}, format="json")
    assert made.status_code == 201, made.content
    assert made.json()["clients"] == [worker_node.pk]
    host = client.get(f"/api/v1/hosts/{worker_node.pk}/").json()
    assert (host["role"], host["client_weight"]) == ("client", 1)

"""Events name backends, endpoints and runs by id (collectors.references): the names come back
through the resolvers campaigns registers, the filters work by id and by name, the API checks
the ids it is given, and an event outlives the run or backend it names."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from campaigns.models import Backend, Run
from collectors import references
from collectors.events import log_event
from collectors.models import Event, Host
from tests.support.api import api
from tests.support.factories import endpoint, mock_campaign

pytestmark = pytest.mark.django_db


@pytest.fixture
def named():
    campaign = mock_campaign("refs")
    source = campaign.sources.get()
    other = endpoint("elsewhere", "root://other.test:1094//data/", backend_name="dcache-tape")
    run = Run.objects.create(campaign=campaign, state="succeeded")
    host = Host.objects.create(name="door7")
    return {
        "run": run, "source": source, "other": other, "host": host,
        "event": log_event("config_change", "raised a limit", host=host, backend=source.backend, endpoint=source,
                           run=run),
        "elsewhere": log_event("note", "tape door note", backend=other.backend, endpoint=other),
    }  # fmt: skip


def test_log_event_stores_the_ids_and_attach_names_them_in_one_query_a_kind(named):
    event = Event.objects.get(pk=named["event"].pk)
    assert (event.backend_id, event.endpoint_id, event.run_id) == (
        named["source"].backend_id,
        named["source"].pk,
        named["run"].pk,
    )
    events = list(Event.objects.all())
    with CaptureQueriesContext(connection) as captured:
        references.attach(events)
    assert len(captured) == 3  # backends, endpoints, runs: never one a row
    by_pk = {e.pk: e for e in events}
    assert by_pk[named["event"].pk].endpoint.name == named["source"].name
    assert by_pk[named["event"].pk].run == named["run"]
    assert by_pk[named["elsewhere"].pk].backend.name == "dcache-tape"
    assert by_pk[named["elsewhere"].pk].run is None


def test_an_event_outlives_the_run_and_backend_it_names(named, viewer, client):
    run_id = named["run"].pk
    gone = log_event("note", "a note on a run about to go", run=named["run"])
    Run.objects.filter(pk=run_id).delete()
    Event.objects.filter(pk=named["elsewhere"].pk).update(endpoint_id=None)
    other_backend = named["other"].backend
    named["other"].delete()
    Backend.objects.filter(pk=other_backend.pk).delete()
    assert Event.objects.filter(run_id=run_id).count() == 2  # the log keeps what happened
    [event] = references.attach([Event.objects.get(pk=gone.pk)])
    assert event.run.name == f"#{run_id} (deleted)" and event.run.deleted
    client.force_login(viewer)
    page = client.get("/hosts/events/").content.decode()
    assert f"run #{run_id} (deleted)" in page
    assert f"#{other_backend.pk} (deleted)" in page


@pytest.mark.parametrize(
    "query, expected",
    [
        (lambda n: f"backend={n['source'].backend_id}", ["event"]),
        (lambda n: f"endpoint={n['other'].pk}", ["elsewhere"]),
        (lambda n: f"run={n['run'].pk}", ["event"]),
        (lambda n: "backend__name=dcache-tape", ["elsewhere"]),
        (lambda n: f"endpoint__name={n['source'].name}", ["event"]),
        (lambda n: "backend__name=no-such-backend", []),
        (lambda n: "run__name=refs", ["event"]),
    ],
)
def test_events_filter_by_id_and_by_name(named, viewer, query, expected):
    response = api(viewer, "viewer").get(f"/api/v1/events/?{query(named)}")
    assert response.status_code == 200, response.content
    assert sorted(e["id"] for e in response.json()["results"]) == sorted(named[key].pk for key in expected)


def test_the_api_shows_the_ids_and_refuses_one_that_names_nothing(named, operator):
    client = api(operator, "operator")
    shown = client.get(f"/api/v1/events/{named['event'].pk}/").json()
    assert (shown["backend"], shown["endpoint"], shown["run"]) == (
        named["source"].backend_id,
        named["source"].pk,
        named["run"].pk,
    )
    made = client.post("/api/v1/events/", {"kind": "note", "summary": "via API", "run": named["run"].pk}, format="json")
    assert made.status_code == 201, made.content
    assert Event.objects.get(pk=made.json()["id"]).run_id == named["run"].pk
    refused = client.post("/api/v1/events/", {"kind": "note", "summary": "x", "backend": 999999}, format="json")
    assert refused.status_code == 400
    assert "backend" in refused.json()["error"]["fields"]


def test_the_event_form_offers_backends_and_endpoints_from_campaigns(named, operator, client):
    client.force_login(operator)
    page = client.get("/hosts/events/new/").content.decode()
    assert "dcache-tape" in page and named["source"].name in page
    response = client.post(
        "/hosts/events/new/",
        {"kind": "note", "time": "2026-01-01T00:00", "summary": "by form", "backend": named["other"].backend_id,
         "endpoint": named["other"].pk},
    )  # fmt: skip
    assert response.status_code == 302, response.content[:500]
    made = Event.objects.get(summary="by form")
    assert (made.backend_id, made.endpoint_id) == (named["other"].backend_id, named["other"].pk)

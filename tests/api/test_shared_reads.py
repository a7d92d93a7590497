"""API reads computed once per moment and shared by every client of that moment, whatever its
role or way in (campaigns.api.shared_reads): a live run and its transfers, the lists of runs and
campaigns.

What is checked: two clients of different roles get the same body, and the second costs no
serializer's queries; a change of the run's figures, or of a listed table, is seen at once, not
a second later; a run that has ended, a browsable page, or a read inside a transaction are
answered for themselves; bad run ids give the answers they gave before. Transactional: a read
inside the test's transaction is rightly never shared.
"""

from __future__ import annotations

import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from campaigns.models import Run, Transfer
from tests.support.api import api
from tests.support.factories import mock_campaign

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def live_run():
    campaign = mock_campaign("live-reads")
    run = Run.objects.create(campaign=campaign, state="running", planned_files=4, started_at=timezone.now(),
                             heartbeat_at=timezone.now())  # fmt: skip
    source = campaign.sources.first()
    for i in range(4):
        Transfer.objects.create(run=run, index=i, source=f"mock://src.test/{i}", destination=f"mock://dst.test/{i}",
                                source_endpoint=source, destination_endpoint=source, size=1)  # fmt: skip
    return run


def read(client, path: str):
    with CaptureQueriesContext(connection) as queries:
        response = client.get(path)
    return response, len(queries)


@pytest.mark.parametrize(
    "path", ["/api/v1/runs/{pk}/", "/api/v1/transfers/?run={pk}", "/api/v1/runs/", "/api/v1/campaigns/?limit=5"]
)
def test_one_rendering_answers_every_client_of_the_moment(live_run, operator, viewer, path):
    path = path.format(pk=live_run.pk)
    # Both reads within one second of the clock (a moment's key): tried again if they straddle one.
    for _ in range(10):
        time.sleep(1.01 - time.time() % 1)  # a second no read has been made in yet
        second_started = int(time.time())
        first, computed = read(api(operator, "operator"), path)
        second, shared = read(api(viewer, "viewer"), path)
        again = api(viewer, "viewer").get(path, HTTP_IF_NONE_MATCH=second["ETag"])
        if int(time.time()) == second_started:
            break
    assert first.status_code == second.status_code == 200
    assert first.content == second.content and first["Content-Type"] == second["Content-Type"] == "application/json"
    # The second client's read: its token and role, the run's figures; no serializer's queries.
    assert shared < computed, (shared, computed)
    # A client holding this body is told it has not changed.
    assert again.status_code == 304 and again["ETag"] == second["ETag"]


def test_a_change_of_the_runs_figures_is_seen_at_once(live_run, operator):
    client = api(operator, "operator")
    path = f"/api/v1/runs/{live_run.pk}/"
    assert client.get(path).json()["files_done"] == 0
    Run.objects.filter(pk=live_run.pk).update(files_done=3)
    assert client.get(path).json()["files_done"] == 3  # within the same second: a new state, a new answer


def test_an_ended_run_and_other_reads_are_answered_for_themselves(live_run, operator):
    client = api(operator, "operator")
    Run.objects.filter(pk=live_run.pk).update(state="succeeded", finished_at=timezone.now())
    path = f"/api/v1/runs/{live_run.pk}/"
    assert client.get(path).json()["stop_reason"] == ""
    Run.objects.filter(pk=live_run.pk).update(stop_reason="set by hand")  # not a progress figure
    assert client.get(path).json()["stop_reason"] == "set by hand"
    assert "ETag" not in client.get(path)
    # The browsable API names its user: never shared.
    page = client.get(f"/api/v1/transfers/?run={live_run.pk}", HTTP_ACCEPT="text/html")
    assert page.status_code == 200 and "ETag" not in page


@pytest.mark.parametrize(
    ("query", "status"),
    [("run=abc", 400), ("run=99999999999999999999", 400), ("run=0", 400), ("run=-1", 400), ("run=999999", 400)],
)
def test_bad_run_ids_are_refused_as_before(operator, query, status):
    response = api(operator, "operator").get(f"/api/v1/transfers/?{query}")
    assert response.status_code == status, response.content


def test_no_such_run_is_not_found(operator):
    assert api(operator, "operator").get("/api/v1/runs/999999/").status_code == 404
    assert api(operator, "operator").get("/api/v1/runs/99999999999999999999/").status_code == 404


def test_a_change_of_a_listed_table_is_seen_at_once(live_run, operator):
    client = api(operator, "operator")
    assert [r["id"] for r in client.get("/api/v1/runs/").json()["results"]] == [live_run.pk]
    assert client.get("/api/v1/campaigns/").json()["count"] == 1
    # Within the same second: new rows, and a change made by a statement of no model's save().
    other = Run.objects.create(campaign=live_run.campaign, state="queued")
    assert {r["id"] for r in client.get("/api/v1/runs/").json()["results"]} == {live_run.pk, other.pk}
    Run.objects.filter(pk=other.pk).update(state="cancelled")
    assert {r["id"]: r["state"] for r in client.get("/api/v1/runs/").json()["results"]}[other.pk] == "cancelled"
    mock_campaign("live-reads-two")
    assert client.get("/api/v1/campaigns/").json()["count"] == 2
    live_run.campaign.sources.clear()
    [first] = [c for c in client.get("/api/v1/campaigns/").json()["results"] if c["id"] == live_run.campaign_id]
    assert first["sources"] == []


def test_a_read_inside_a_transaction_is_never_shared(live_run, operator):
    from django.db import transaction

    client = api(operator, "operator")
    shared_body = client.get("/api/v1/runs/").content
    with transaction.atomic():
        Run.objects.create(campaign=live_run.campaign, state="queued")
        inside = client.get("/api/v1/runs/")
        assert "ETag" not in inside and inside.json()["count"] == 2
        transaction.set_rollback(True)
    after = client.get("/api/v1/runs/")
    assert after.json()["count"] == 1 and after.content == shared_body


HOSTILE_QUERIES = [
    "&page_note=" + "x" * 3000,
    "&cursor=%00%01%20bad",
    "&state=succeeded&state=failed",
    "&cursor=" + "é" * 50,
]


@pytest.mark.parametrize("query", HOSTILE_QUERIES)
def test_any_query_of_a_live_runs_transfers_gets_an_answer_and_a_clean_cache_key(live_run, operator, query):
    import warnings

    from django.core.cache import CacheKeyWarning

    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheKeyWarning)
        response = api(operator, "operator").get(f"/api/v1/transfers/?run={live_run.pk}{query}")
    assert response.status_code in (200, 400, 404), response.content[:500]

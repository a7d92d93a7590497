"""Automation through the API: define a campaign, start it, export, compare, log events;
secrets never come back."""

from __future__ import annotations

import csv
import io
import json

import pytest
from rest_framework.test import APIClient

from campaigns import runs
from campaigns.models import Run
from campaigns.runs.lifecycle import RunDriver
from storageops.api import tokens
from storageops.models import APIToken
from tests.support.api import api
from tests.support.factories import backend, endpoint, half_failing_campaign, mock_campaign

pytestmark = pytest.mark.django_db(transaction=True)


def finished_run(name: str, **fields) -> Run:
    run = runs.create_run(mock_campaign(name, **fields), trigger="api")
    RunDriver(run.pk).drive()
    run.refresh_from_db()
    return run


def test_create_a_campaign_with_field_errors_then_fixed(admin_user):
    client = api(admin_user, "admin")
    src = endpoint("api-src", "mock://src.test/data/")
    dst = endpoint("api-dst", "mock://dst.test/data/?time=0")
    body = {"name": "api-sweep", "sources": [src.pk], "destinations": [dst.pk], "file_count": 0,
            "concurrency_steps": [1, 2], "checksum_algorithm": "sha512"}  # fmt: skip
    bad = client.post("/api/v1/campaigns/", body, format="json")
    assert bad.status_code == 400
    fields = bad.json()["error"]["fields"]
    assert set(fields) >= {"file_count", "checksum_algorithm"}
    body.update({"file_count": 20, "checksum_algorithm": "adler32", "step_files": 10})
    ok = client.post("/api/v1/campaigns/", body, format="json")
    assert ok.status_code == 201, ok.content
    assert ok.json()["planned_files"] == 20


def test_endpoint_urls_are_checked_by_scheme(admin_user):
    client = api(admin_user, "admin")
    response = client.post("/api/v1/endpoints/", {"name": "evil", "backend": backend("b").pk,
                                                  "url_prefix": "javascript:alert(1)"}, format="json")  # fmt: skip
    assert response.status_code == 400
    assert "Unsupported URL scheme" in response.json()["error"]["fields"]["url_prefix"][0]


def test_token_plaintext_is_not_stored_and_secrets_never_come_back(admin_user, viewer):
    token, secret = tokens.create_token(admin_user, "ansible", "admin")
    stored = APIToken.objects.get(pk=token.pk)
    assert secret not in json.dumps([getattr(stored, f.attname) for f in APIToken._meta.fields], default=str)
    assert stored.prefix == secret[:8] and len(stored.key_hash) == 64
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    created = client.post("/api/v1/endpoints/", {"name": "tok", "backend": backend("b").pk,
                                                 "url_prefix": "davs://door2:2880/data/",
                                                 "bearer_token": "eyJSECRETTOKEN"}, format="json")  # fmt: skip
    assert created.status_code == 201
    assert created.json()["has_token"] is True
    run = finished_run("secret-run")
    ep = created.json()["id"]
    for path in ("/api/v1/endpoints/", f"/api/v1/endpoints/{ep}/", f"/api/v1/runs/{run.pk}/", "/api/v1/campaigns/",
                 "/api/v1/events/", "/api/schema/"):  # fmt: skip
        body = api(viewer, "viewer").get(path).content.decode()
        assert "eyJSECRETTOKEN" not in body and secret not in body, path
    tokens.revoke(token)
    assert client.get("/api/v1/backends/").status_code == 401


def test_start_poll_cancel_and_export(operator, worker_free_start):
    client = api(operator, "operator")
    campaign = mock_campaign("api-run", file_count=30, concurrency_steps=[2, 4], step_files=15)
    started = client.post(f"/api/v1/campaigns/{campaign.pk}/start/")
    assert started.status_code == 202
    run_id = started.json()["id"]
    RunDriver(run_id).drive()  # the worker's part, in-process here
    polled = client.get(f"/api/v1/runs/{run_id}/").json()
    assert polled["state"] == "succeeded" and polled["progress_percent"] == 100.0
    export = client.get(f"/api/v1/runs/{run_id}/export/", {"as": "csv"})
    assert export.status_code == 200 and export["Content-Type"] == "text/csv"
    rows = list(csv.DictReader(io.StringIO(b"".join(export.streaming_content).decode())))
    assert len(rows) == 30 and {r["state"] for r in rows} == {"succeeded"}
    as_json = json.loads(b"".join(client.get(f"/api/v1/runs/{run_id}/export/", {"as": "json"}).streaming_content))
    assert len(as_json["transfers"]) == 30
    steps = b"".join(client.get(f"/api/v1/runs/{run_id}/steps-csv/").streaming_content).decode().splitlines()
    assert steps[0].startswith("step,concurrency") and len(steps) == 3
    assert client.post(f"/api/v1/runs/{run_id}/cancel/").status_code == 400  # already over


def test_a_partial_run_and_its_retry_through_the_api(operator, viewer, worker_free_start):
    first = runs.create_run(half_failing_campaign("api-half", file_count=6), trigger="api")
    RunDriver(first.pk).drive()
    body = api(viewer, "viewer").get(f"/api/v1/runs/{first.pk}/").json()
    assert body["state"] == "partial"
    assert (body["files_done"], body["files_failed"], body["files_skipped"]) == (3, 3, 0)
    assert (body["retry_of"], body["retries"], body["retryable"]) == (None, [], 3)
    listed = api(viewer, "viewer").get("/api/v1/runs/", {"state": "partial"}).json()["results"]
    assert [r["id"] for r in listed] == [first.pk]

    assert api(viewer, "viewer").post(f"/api/v1/runs/{first.pk}/retry-failed/").status_code == 403
    client = api(operator, "operator")
    created = client.post(f"/api/v1/runs/{first.pk}/retry-failed/")
    assert created.status_code == 201, created.content
    retry = created.json()
    assert (retry["state"], retry["retry_of"], retry["planned_files"], retry["trigger"]) == (
        "pending",
        first.pk,
        3,
        "api",
    )
    assert retry["snapshot"]["retry"]["indices"] == [1, 3, 5]
    assert client.get(f"/api/v1/runs/{first.pk}/").json()["retries"] == [retry["id"]]

    refused = client.post(f"/api/v1/runs/{first.pk}/retry-failed/")
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["status"] == 400 and f"already retried by run #{retry['id']}" in error["fields"]["non_field_errors"][0]
    live = client.post(f"/api/v1/runs/{retry['id']}/retry-failed/")
    assert live.status_code == 400 and "only a finished run" in live.json()["error"]["fields"]["non_field_errors"][0]


def test_the_runs_list_gives_headlines_and_the_run_gives_everything(viewer, worker_free_start):
    run = runs.create_run(half_failing_campaign("api-list", file_count=6), trigger="api")
    RunDriver(run.pk).drive()
    client = api(viewer, "viewer")
    full = client.get(f"/api/v1/runs/{run.pk}/").json()
    [listed] = client.get("/api/v1/runs/", {"campaign": run.campaign_id}).json()["results"]
    # The big JSON stays out of a list; its headlines come out of it in the database.
    assert not {"snapshot", "versions", "summary", "verdict", "judgement"} & set(listed)
    assert full["verdict"]["headline"] and listed["verdict_headline"] == full["verdict"]["headline"]
    assert listed["verdict_status"] == full["verdict"]["status"]
    assert listed["judgement_status"] == full["judgement"]["status"]
    shared = set(listed) - {"verdict_status", "verdict_headline", "judgement_status", "judgement_headline"}
    assert {k: listed[k] for k in shared} == {k: full[k] for k in shared}
    assert listed["retryable"] == 3
    # Rows deleted by retention: nothing to retry, in the list as on the run.
    Run.objects.filter(pk=run.pk).update(summary={**full["summary"], "archived": {"transfers_deleted": 6}})
    [listed] = client.get("/api/v1/runs/", {"campaign": run.campaign_id}).json()["results"]
    assert listed["retryable"] == client.get(f"/api/v1/runs/{run.pk}/").json()["retryable"] == 0


def test_a_finished_runs_throughput_is_its_final_figure_not_its_last_live_rate(viewer):
    run = finished_run("api-final-rate", file_count=6)
    final = run.summary["total"]["throughput_bps"]
    # The final figure against the world: bytes of the successful copies over their own window.
    rows = list(run.transfers.filter(state="succeeded"))
    window = (max(t.finished_at for t in rows) - min(t.started_at for t in rows)).total_seconds()
    assert final == pytest.approx(sum(t.bytes_transferred for t in rows) / window, rel=0.01)
    # What the driver left in the live column at the end (the report's 0.0 beside 2.33 MB/s).
    Run.objects.filter(pk=run.pk).update(throughput_bps=0.0)
    client = api(viewer, "viewer")
    full = client.get(f"/api/v1/runs/{run.pk}/").json()
    [listed] = client.get("/api/v1/runs/", {"campaign": run.campaign_id}).json()["results"]
    for shown in (full, listed):
        assert shown["throughput_bps"] == pytest.approx(final)
        assert shown["live_rate_bps"] is None
    # A live run: both are its live rate.
    Run.objects.filter(pk=run.pk).update(state="running", throughput_bps=1234.5)
    live = client.get(f"/api/v1/runs/{run.pk}/").json()
    assert live["throughput_bps"] == live["live_rate_bps"] == 1234.5


def test_comparison_puts_runs_side_by_side(viewer):
    a = finished_run("cmp-a", file_count=40, concurrency_steps=[1, 4], step_files=20)
    b = finished_run("cmp-b", file_count=40, concurrency_steps=[2], streams=4)
    response = api(viewer, "viewer").get("/api/v1/compare/", {"runs": f"{a.pk},{b.pk}"})
    assert response.status_code == 200, response.content
    table = response.json()
    assert [r["run"] for r in table["runs"]] == [a.pk, b.pk]
    assert {"concurrency_steps", "streams"} <= set(table["differing_parameters"])
    first = table["runs"][0]
    assert first["success_rate"] == 1.0 and first["peak"]["concurrency"] in (1, 4)
    assert first["throughput_bps"] == pytest.approx(a.summary["total"]["throughput_bps"])
    missing = api(viewer, "viewer").get("/api/v1/compare/", {"runs": "999999"})
    assert missing.status_code == 400 and "No run with id 999999" in missing.json()["error"]["fields"]["runs"][0]


def test_automation_posts_a_deploy_event(operator):
    response = api(operator, "operator").post(
        "/api/v1/events/", {"kind": "deploy", "summary": "deployed xrootd 5.6.9 on door3"}, format="json"
    )
    assert response.status_code == 201
    body = response.json()
    assert body["source"] == "api" and body["who"] == "otto-operator"


@pytest.fixture
def worker_free_start(django_capture_on_commit_callbacks):
    """Starting a run dispatches to a worker on commit; these tests drive it in-process."""
    with django_capture_on_commit_callbacks(execute=False):
        yield

"""Events pushed to Grafana's annotations API, tested against a local HTTP server that
records what it is sent (the real Grafana cannot run here), and served in the shape a
Grafana JSON datasource reads."""

from __future__ import annotations

import base64
import json
import threading
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

from collectors import grafana
from collectors.events import log_event
from collectors.models import Host
from tests.support.factories import mock_campaign

pytestmark = pytest.mark.django_db


class RecordingGrafana:
    """Answers POST /api/annotations like Grafana ({"message": "Annotation added", "id": N})."""

    def __init__(self, failures: int = 0) -> None:
        self.requests: list[dict] = []
        self.failures = failures
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
                if outer.failures > 0:
                    outer.failures -= 1
                    self.send_response(503)
                    self.end_headers()
                    return
                reply = json.dumps({"message": "Annotation added", "id": len(outer.requests)}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> RecordingGrafana:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def grafana_settings(settings):
    def configure(url: str) -> None:
        settings.STORAGEOPS_GRAFANA_URL = url
        settings.STORAGEOPS_GRAFANA_TOKEN = "glsa_test_token"
        settings.STORAGEOPS_SITE_NAME = "lancaster"

    return configure


def test_an_event_is_pushed_with_grafanas_payload_shape(grafana_settings):
    with RecordingGrafana() as fake:
        grafana_settings(fake.url)
        door = Host.objects.create(name="door2")
        when = datetime(2026, 5, 4, 9, 30, tzinfo=UTC)
        event = log_event("service_restart", "xrootd restarted", host=door, time=when, source="collector")
        assert grafana.push(event) == 1
    (request,) = fake.requests
    assert request["path"] == "/api/annotations"
    assert request["auth"] == "Bearer glsa_test_token"
    assert request["body"] == {
        "time": int(when.timestamp() * 1000),
        "tags": ["site:lancaster", "kind:service_restart", "host:door2"],
        "text": "xrootd restarted",
    }


def test_a_run_end_is_a_region_from_start_to_end(grafana_settings):
    from campaigns.models import Run

    start = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)
    run = Run.objects.create(campaign=mock_campaign("region"), started_at=start, finished_at=start + timedelta(hours=1))
    with RecordingGrafana() as fake:
        grafana_settings(fake.url)
        grafana.push(log_event("run_end", "run ended", run=run, time=start + timedelta(hours=1)))
    body = fake.requests[0]["body"]
    assert body["time"] == int(start.timestamp() * 1000)
    assert body["timeEnd"] == int((start + timedelta(hours=1)).timestamp() * 1000)
    assert f"run:{run.pk}" in body["tags"] and "kind:run_end" in body["tags"]
    assert body["text"] == "run ended" and not [t for t in body["tags"] if t.startswith("judgement:")]


def test_a_judged_run_end_carries_its_judgement_to_grafana(grafana_settings):
    from campaigns.models import Run

    start = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)
    headline = "Throughput regressed 23 % against the median of 6 comparable runs."
    run = Run.objects.create(
        campaign=mock_campaign("judged-region"), started_at=start, finished_at=start + timedelta(hours=1),
        summary={"judgement": {"status": "regressed", "headline": headline}},
    )  # fmt: skip
    with RecordingGrafana() as fake:
        grafana_settings(fake.url)
        grafana.push(log_event("run_end", "run ended", run=run, time=start + timedelta(hours=1)))
    body = fake.requests[0]["body"]
    assert body["text"] == f"run ended\n{headline}" and "judgement:regressed" in body["tags"]


def test_transient_grafana_errors_are_retried(grafana_settings):
    with RecordingGrafana(failures=2) as fake:
        grafana_settings(fake.url)
        assert grafana.push(log_event("note", "raised xrootd.chksum max 16 -> 48 on door2")) == 3
    assert len(fake.requests) == 3


def test_a_grafana_that_stays_down_raises_for_the_task_to_retry_later(grafana_settings):
    with RecordingGrafana(failures=10) as fake:
        grafana_settings(fake.url)
        with pytest.raises(requests.ConnectionError, match="did not take the annotation"):
            grafana.push(log_event("note", "nobody listens"))
    assert len(fake.requests) == grafana.ATTEMPTS


def test_logging_an_event_queues_the_push_only_when_configured(grafana_settings, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        log_event("note", "not configured: nothing to push")
    assert callbacks == []
    grafana_settings("http://127.0.0.1:9")
    with django_capture_on_commit_callbacks() as callbacks:
        log_event("note", "configured: one push queued")
    assert len(callbacks) == 1


def test_the_datasource_endpoint_answers_in_annotation_shape(client, viewer):
    door = Host.objects.create(name="door1")
    when = datetime(2026, 5, 4, 9, 30, tzinfo=UTC)
    log_event("config_change", "xrootd.cfg changed", host=door, time=when)
    log_event("note", "outside the range", time=when + timedelta(days=2))
    auth = "Basic " + base64.b64encode(b"vera-viewer:correct horse battery staple").decode()
    body = {"range": {"from": "2026-05-04T00:00:00Z", "to": "2026-05-05T00:00:00Z"}, "annotation": {"query": ""}}
    response = client.post("/api/v1/grafana/annotations", body, content_type="application/json",
                           HTTP_AUTHORIZATION=auth)  # fmt: skip
    assert response.status_code == 200, response.content
    (item,) = response.json()
    assert item["time"] == int(when.timestamp() * 1000)
    assert item["title"] == "Config change" and item["text"] == "xrootd.cfg changed"
    assert "host:door1" in item["tags"]
    by_tag = client.get("/api/v1/grafana/annotations", {"from": 0, "to": 2**42, "tags": "host:door9"},
                        HTTP_AUTHORIZATION=auth)  # fmt: skip
    assert by_tag.json() == []
    assert client.get("/api/v1/grafana/annotations", {"from": 0, "to": 1}).status_code in (401, 403)
    bad = client.get("/api/v1/grafana/annotations", {"from": "yesterday"}, HTTP_AUTHORIZATION=auth)
    assert bad.status_code == 400 and "time range" in bad.json()["error"]["fields"]["range"][0]


def test_an_operator_logs_a_change_from_the_events_page(client, operator, viewer):
    door = Host.objects.create(name="door2")
    client.force_login(viewer)
    assert client.get("/hosts/events/new/").status_code == 403
    client.force_login(operator)
    assert client.get("/hosts/events/new/").status_code == 200
    bad = client.post("/hosts/events/new/", {"kind": "config_change", "time": "2999-01-01 00:00", "summary": ""})
    assert bad.status_code == 400
    assert b"cannot be logged in the future" in bad.content and b"This field is required" in bad.content
    ok = client.post("/hosts/events/new/", {
        "kind": "config_change", "time": "2026-05-04 09:30", "host": door.pk,
        "summary": "raised xrootd.chksum max 16 -> 48 on door2",
    })  # fmt: skip
    assert ok.status_code == 302
    from collectors.models import Event

    event = Event.objects.get(summary__startswith="raised xrootd.chksum")
    assert (event.source, event.user, event.who, event.host) == ("operator", operator, "otto-operator", door)

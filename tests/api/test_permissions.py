"""The permission matrix: every endpoint x {anonymous, viewer, operator, admin, expired token}."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from alerts.models import Delivery, Subscription
from campaigns.models import CampaignSchedule, Endpoint, ReadinessCheck, Run, TokenIssuer, Transfer
from campaigns.runs import scheduling
from campaigns.runs.engines.fts.models import FtsInstance
from campaigns.runs.planning import campaign_snapshot
from collectors.events import log_event
from collectors.models import Host, HostTestSeries
from storageops.api import tokens
from tests.support.factories import backend, endpoint, mock_campaign

pytestmark = pytest.mark.django_db

LEVEL = {"anonymous": -1, "expired": -1, "viewer": 0, "operator": 1, "admin": 2}
NEEDS = {"viewer": 0, "operator": 1, "admin": 2}


@pytest.fixture
def objects():
    campaign = mock_campaign("matrix")
    run = Run.objects.create(campaign=campaign)
    source = campaign.sources.first()
    return {
        "backend": backend("matrix-backend"),
        "endpoint": source,
        # Nothing refers to these, so deleting them succeeds rather than answering 409.
        "spare_endpoint": endpoint("matrix-spare", "root://spare:1094//x/", backend_name="matrix-backend"),
        "spare_campaign": mock_campaign("matrix-spare"),
        "spare_backend": backend("matrix-spare-backend"),
        "host": (host := Host.objects.create(name="matrix-door")),
        "series": HostTestSeries.objects.create(host=host, tool="dd", params={"tool": "dd"}, repeats=1, byte_budget=1),
        "campaign": campaign,
        "run": run,
        "transfer": Transfer.objects.create(
            run=run,
            index=0,
            source="mock://src.test/data/a",
            destination="mock://dst.test/data/a",
            source_endpoint=source,
            destination_endpoint=source,
            size=1,
        ),
        "event": log_event("note", "matrix note"),
        "finished_run": Run.objects.create(campaign=campaign, state="succeeded"),
        "judged_run": Run.objects.create(campaign=campaign, state="succeeded", summary={"total": {"files_ok": 1}}),
        # Finished with half its planned transfers failed; its plan was never written as rows,
        # so a retry re-drives all it did not succeed at.
        "partial_run": Run.objects.create(
            campaign=campaign,
            state="partial",
            snapshot=campaign_snapshot(campaign),
            planned_files=campaign.planned_files,
            planned_bytes=campaign.planned_bytes,
            files_done=5,
            files_failed=5,
        ),
        "schedule": scheduling.save_schedule(CampaignSchedule(campaign=campaign, kind="cron", cron="0 9 * * 1-5")),
        "unscheduled": mock_campaign("matrix-unscheduled"),
        "fts": FtsInstance.objects.create(name="matrix-fts", url="https://fts.test:8446"),
        "issuer": TokenIssuer.objects.create(
            name="matrix-iam", token_endpoint="https://iam.test/token", client_id="so", client_secret="matrix-secret"
        ),
        "readiness": ReadinessCheck.objects.create(endpoint=Endpoint.objects.get(name="matrix-spare")),
        # Email only: the tests' mail backend (locmem) takes it, so the test action needs no SMTP server.
        "subscription": (subscription := Subscription.objects.create(name="matrix-alerts", email="ops@example.org")),
        "spare_subscription": Subscription.objects.create(name="matrix-spare-alerts", email="spare@example.org"),
        "delivery": Delivery.objects.create(
            subscription=subscription, kind="regression", campaign=campaign, run=run, subject="matrix", state="sent"
        ),
    }


def _payload(kind: str, objects: dict) -> dict:
    return {
        "backends": {"name": "new-backend", "access_layer": "xrootd"},
        "hosts": {"name": "new-door"},
        "endpoints": {"name": "new-ep", "backend": backend("matrix-backend").pk, "url_prefix": "root://d:1094//x/"},
        "campaigns": {
            "name": "new-campaign",
            "sources": [objects["endpoint"].pk],
            "destinations": [objects["spare_endpoint"].pk],
            "concurrency_steps": [1],
        },
        "events": {"kind": "note", "summary": "API note"},
        "host_test": {"params": {"tool": "dd", "size": "1M", "repeats": 1}},
        "backend_put": {"name": "matrix-backend", "access_layer": "dcache"},
        "host_put": {"name": "matrix-door-2"},
        "endpoint_put": {
            "name": "matrix-spare",
            "backend": backend("matrix-backend").pk,
            "url_prefix": "root://spare:1094//y/",
        },
        "campaign_put": {"name": "matrix", "sources": [objects["endpoint"].pk], "concurrency_steps": [2]},
        "schedules": {"campaign": objects["unscheduled"].pk, "kind": "cron", "cron": "0 9 * * 1-5"},
        "schedule_put": {"campaign": objects["campaign"].pk, "kind": "interval", "interval_minutes": 60},
        "fts": {"name": "new-fts", "rest_url": "https://fts2.test:8446"},
        "fts_put": {"name": "matrix-fts", "rest_url": "https://fts3.test:8446"},
        "issuer": {"name": "new-iam", "token_endpoint": "https://iam2.test/t", "client_id": "so", "client_secret": "x"},
        "issuer_put": {"name": "matrix-iam", "token_endpoint": "https://iam3.test/token", "client_id": "so"},
        "readiness": {"endpoint": objects["spare_endpoint"].pk},
        "subscriptions": {"name": "new-alerts", "campaign": objects["campaign"].pk, "email": "new@example.org"},
        "subscription_put": {"name": "matrix-alerts", "kinds": ["stall"], "webhook_url": "https://chat.test/hooks/x"},
    }[kind]


# (method, path template, body kind, required role, expected success status)
MATRIX = [
    ("get", "/api/v1/backends/", None, "viewer", 200),
    ("post", "/api/v1/backends/", "backends", "admin", 201),
    ("get", "/api/v1/backends/{backend}/", None, "viewer", 200),
    ("patch", "/api/v1/backends/{backend}/", {"notes": "x"}, "admin", 200),
    ("put", "/api/v1/backends/{backend}/", "backend_put", "admin", 200),
    ("delete", "/api/v1/backends/{spare_backend}/", None, "admin", 204),
    ("get", "/api/v1/hosts/{host}/", None, "viewer", 200),
    ("put", "/api/v1/hosts/{host}/", "host_put", "admin", 200),
    ("patch", "/api/v1/hosts/{host}/", {"notes": "x"}, "admin", 200),
    ("delete", "/api/v1/hosts/{host}/", None, "admin", 204),
    ("get", "/api/v1/endpoints/", None, "viewer", 200),
    ("post", "/api/v1/endpoints/", "endpoints", "admin", 201),
    ("get", "/api/v1/endpoints/{endpoint}/", None, "viewer", 200),
    ("put", "/api/v1/endpoints/{spare_endpoint}/", "endpoint_put", "admin", 200),
    ("patch", "/api/v1/endpoints/{endpoint}/", {"notes": "x"}, "admin", 200),
    ("delete", "/api/v1/endpoints/{spare_endpoint}/", None, "admin", 204),
    ("get", "/api/v1/hosts/", None, "viewer", 200),
    ("get", "/api/v1/hosts/{host}/tests/", None, "viewer", 200),
    ("post", "/api/v1/hosts/{host}/tests/", "host_test", "operator", 201),
    ("get", "/api/v1/host-tests/", None, "viewer", 200),
    ("get", "/api/v1/host-tests/{series}/", None, "viewer", 200),
    ("post", "/api/v1/host-tests/{series}/cancel/", None, "operator", 202),
    ("post", "/api/v1/hosts/", "hosts", "admin", 201),
    ("get", "/api/v1/campaigns/", None, "viewer", 200),
    ("post", "/api/v1/campaigns/", "campaigns", "admin", 201),
    ("get", "/api/v1/campaigns/{campaign}/", None, "viewer", 200),
    ("put", "/api/v1/campaigns/{campaign}/", "campaign_put", "admin", 200),
    ("patch", "/api/v1/campaigns/{campaign}/", {"description": "x"}, "admin", 200),
    ("delete", "/api/v1/campaigns/{spare_campaign}/", None, "admin", 204),
    ("post", "/api/v1/campaigns/{campaign}/start/", None, "operator", 202),
    ("post", "/api/v1/campaigns/{campaign}/clone/", {"name": "matrix-copy"}, "admin", 201),
    ("get", "/api/v1/runs/", None, "viewer", 200),
    ("get", "/api/v1/runs/{run}/", None, "viewer", 200),
    ("post", "/api/v1/runs/{run}/cancel/", None, "operator", 202),
    ("get", "/api/v1/runs/{run}/export/", None, "viewer", 200),
    ("get", "/api/v1/runs/{run}/steps-csv/", None, "viewer", 200),
    ("get", "/api/v1/compare/?runs={run}", None, "viewer", 200),
    ("get", "/api/v1/runs/{run}/verdict/", None, "viewer", 200),
    ("get", "/api/v1/runs/{finished_run}/report.html", None, "viewer", 200),
    ("get", "/api/v1/runs/{finished_run}/report.pdf", None, "viewer", 503),  # no Chromium here: _no_pdf_printing
    ("get", "/api/v1/compare/report.html?runs={run},{finished_run}", None, "viewer", 200),
    ("get", "/api/v1/compare/report.pdf?runs={run},{finished_run}", None, "viewer", 503),
    ("get", "/api/v1/campaigns/{campaign}/report.html", None, "viewer", 200),
    ("get", "/api/v1/campaigns/{campaign}/report.pdf", None, "viewer", 503),
    ("post", "/api/v1/runs/{finished_run}/cleanup/", None, "operator", 202),
    ("post", "/api/v1/runs/{partial_run}/retry-failed/", None, "operator", 201),
    ("post", "/api/v1/runs/{finished_run}/baseline/", {"choice": "exclude", "reason": "matrix"}, "operator", 200),
    ("post", "/api/v1/runs/{judged_run}/judge-again/", None, "operator", 200),
    ("get", "/api/v1/readiness-checks/", None, "viewer", 200),
    ("post", "/api/v1/readiness-checks/", "readiness", "operator", 202),
    ("get", "/api/v1/readiness-checks/{readiness}/", None, "viewer", 200),
    ("post", "/api/v1/readiness-checks/{readiness}/cancel/", None, "operator", 202),
    ("get", "/api/v1/schedules/", None, "viewer", 200),
    ("post", "/api/v1/schedules/", "schedules", "admin", 201),
    ("get", "/api/v1/schedules/{schedule}/", None, "viewer", 200),
    ("put", "/api/v1/schedules/{schedule}/", "schedule_put", "admin", 200),
    ("patch", "/api/v1/schedules/{schedule}/", {"max_runs": 5}, "admin", 200),
    ("delete", "/api/v1/schedules/{schedule}/", None, "admin", 204),
    ("get", "/api/v1/fts-instances/", None, "viewer", 200),
    ("post", "/api/v1/fts-instances/", "fts", "admin", 201),
    ("get", "/api/v1/fts-instances/{fts}/", None, "viewer", 200),
    ("put", "/api/v1/fts-instances/{fts}/", "fts_put", "admin", 200),
    ("patch", "/api/v1/fts-instances/{fts}/", {"notes": "x"}, "admin", 200),
    ("delete", "/api/v1/fts-instances/{fts}/", None, "admin", 204),
    ("get", "/api/v1/token-issuers/", None, "viewer", 200),
    ("post", "/api/v1/token-issuers/", "issuer", "admin", 201),
    ("get", "/api/v1/token-issuers/{issuer}/", None, "viewer", 200),
    ("put", "/api/v1/token-issuers/{issuer}/", "issuer_put", "admin", 200),
    ("patch", "/api/v1/token-issuers/{issuer}/", {"notes": "x"}, "admin", 200),
    ("delete", "/api/v1/token-issuers/{issuer}/", None, "admin", 204),
    ("get", "/api/v1/transfers/", None, "viewer", 200),
    ("get", "/api/v1/transfers/{transfer}/", None, "viewer", 200),
    ("get", "/api/v1/events/", None, "viewer", 200),
    ("get", "/api/v1/events/{event}/", None, "viewer", 200),
    ("post", "/api/v1/events/", "events", "operator", 201),
    ("get", "/api/v1/samples/", None, "viewer", 200),
    ("get", "/api/v1/alert-subscriptions/", None, "viewer", 200),
    ("post", "/api/v1/alert-subscriptions/", "subscriptions", "admin", 201),
    ("get", "/api/v1/alert-subscriptions/{subscription}/", None, "viewer", 200),
    ("put", "/api/v1/alert-subscriptions/{subscription}/", "subscription_put", "admin", 200),
    ("patch", "/api/v1/alert-subscriptions/{subscription}/", {"active": False}, "admin", 200),
    ("delete", "/api/v1/alert-subscriptions/{spare_subscription}/", None, "admin", 204),
    # 200 whether the channels took it or not; the delivery's state says which.
    ("post", "/api/v1/alert-subscriptions/{subscription}/test/", None, "admin", 200),
    ("get", "/api/v1/alert-deliveries/", None, "viewer", 200),
    ("get", "/api/v1/alert-deliveries/{delivery}/", None, "viewer", 200),
    ("get", "/api/schema/", None, "anonymous", 200),
]


def _client(who: str, users: dict) -> APIClient:
    client = APIClient()
    if who == "anonymous":
        return client
    role = "viewer" if who == "expired" else who
    token, secret = tokens.create_token(users[role], f"{who} token", role)
    if who == "expired":
        token.expires_at = timezone.now() - timedelta(seconds=1)
        token.save()
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    return client


@pytest.fixture(autouse=True)
def _no_pdf_printing(settings):
    # The PDF rows check who may ask, not Chromium (tests/browser/test_report_browser.py prints):
    # with no Chromium, a request that passes the role check is answered 503.
    settings.STORAGEOPS_CHROMIUM = "/nonexistent/chromium"


PERSONAS = ("anonymous", "viewer", "operator", "admin", "expired")


def _expected(who: str, needs: str, ok: int) -> int:
    if needs == "anonymous":
        # Public, but a presented token that is no good is refused, not ignored.
        return 401 if who == "expired" else ok
    if LEVEL[who] < 0:
        return 401
    return ok if LEVEL[who] >= NEEDS[needs] else 403


def _error_shaped(response) -> bool:
    return set(response.json()["error"]) == {"status", "message", "fields"}


@pytest.mark.parametrize(("method", "path", "body", "needs", "ok"), MATRIX)
def test_permission_matrix(objects, viewer, operator, admin_user, method, path, body, needs, ok):
    """Every persona asks the row's request on the same objects, each in a savepoint rolled
    back after it: what one persona's request did (a deletion, a start) is undone before the
    next asks, as if each had a database of its own, and the objects are built once a row."""
    users = {"viewer": viewer, "operator": operator, "admin": admin_user}
    url = path.format(**{k: v.pk for k, v in objects.items()})
    wrong = []
    for who in PERSONAS:
        with transaction.atomic():
            data = _payload(body, objects) if isinstance(body, str) else body
            response = getattr(_client(who, users), method)(url, data, format="json")
            transaction.set_rollback(True)
        expected = _expected(who, needs, ok)
        content = b"(streamed)" if response.streaming else response.content[:300]
        said = f"{who}: {response.status_code}, expected {expected}: {content!r}"
        if response.status_code != expected:
            wrong.append(said)
        elif response.status_code >= 400 and url.startswith("/api/v1/") and not _error_shaped(response):
            wrong.append(f"{said} (not the API's error shape)")
    assert not wrong, f"{method.upper()} {url}\n" + "\n".join(wrong)


def test_the_matrix_covers_every_operation_of_the_schema():
    """A new endpoint cannot slip in without its row in the matrix above."""
    schema = SchemaGenerator().get_schema(request=None, public=True)
    documented = {(method, path) for path, ops in schema["paths"].items() for method in ops}
    covered = {(method, re.sub(r"\{\w+\}", "{id}", path.split("?")[0])) for method, path, *_ in MATRIX}
    assert documented - covered == set()

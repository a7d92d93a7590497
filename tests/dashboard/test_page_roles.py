"""The role matrix of the pages: every route of the URL conf x {anonymous, no role, viewer,
operator, admin}, so that a page answers as the API does for the same role (tests/api/
test_permissions.py covers the API's operations from its schema).

A new route without a row here fails test_the_matrix_covers_every_route.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User
from django.db import transaction
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from alerts.models import Subscription
from campaigns.models import ReadinessCheck, ReadinessGrid, Run
from collectors.events import log_event
from collectors.models import Host, HostTestSeries
from storageops.api import tokens
from tests.support.factories import endpoint, mock_campaign

pytestmark = pytest.mark.django_db

LEVEL = {"anonymous": -2, "no-role": -1, "viewer": 0, "operator": 1, "admin": 2}
# public: no login; signed-in: any signed-in user, role or not; else the least role allowed.
NEEDS = {"public": -2, "signed-in": -1, "viewer": 0, "operator": 1, "admin": 2}

# url name -> (method, path template, least role, status when allowed)
MATRIX: dict[str, tuple[str, str, str, int | tuple[int, ...]]] = {
    "home": ("get", "/", "viewer", 200),
    # 503 when the broker is down on this machine; either way no login and no role needed.
    "healthz": ("get", "/healthz", "public", (200, 503)),
    "metrics": ("get", "/metrics", "public", 200),
    "tokens": ("get", "/tokens/", "viewer", 200),
    # Someone else's token: not found for every role (a user revokes only their own).
    "token_revoke": ("post", "/tokens/{foreign_token}/revoke/", "viewer", 404),
    "login": ("get", "/login/", "public", 200),
    "logout": ("post", "/logout/", "signed-in", 302),
    # Single sign-on is not configured here: not found, for anyone (tests/browser/test_sso_browser.py).
    "oidc_sign_in": ("get", "/oidc/sign-in/", "public", 404),
    "oidc_callback": ("get", "/oidc/callback/", "public", 404),
    "grafana_annotations": ("get", "/api/v1/grafana/annotations?from=0&to=1", "viewer", 200),
    "api-root": ("get", "/api/v1/", "viewer", 200),
    "compare": ("get", "/api/v1/compare/?runs={run}", "viewer", 200),
    "run-report": ("get", "/api/v1/runs/{finished_run}/report.html", "viewer", 200),
    "run-report-pdf": ("get", "/api/v1/runs/{finished_run}/report.pdf", "viewer", 503),
    "compare-report": ("get", "/api/v1/compare/report.html?runs={run},{finished_run}", "viewer", 200),
    "compare-report-pdf": ("get", "/api/v1/compare/report.pdf?runs={run},{finished_run}", "viewer", 503),
    "campaign-report": ("get", "/api/v1/campaigns/{campaign}/report.html", "viewer", 200),
    "campaign-report-pdf": ("get", "/api/v1/campaigns/{campaign}/report.pdf", "viewer", 503),
    "schema": ("get", "/api/schema/", "public", 200),
    "api-docs": ("get", "/api/docs/", "public", 200),
    "api-redoc": ("get", "/api/redoc/", "public", 200),
    "campaigns:campaign_list": ("get", "/campaigns/", "viewer", 200),
    "campaigns:campaign_create": ("get", "/campaigns/new/", "admin", 200),
    "campaigns:campaign_detail": ("get", "/campaigns/{campaign}/", "viewer", 200),
    "campaigns:campaign_history": ("get", "/campaigns/{campaign}/history.json", "viewer", 200),
    "campaigns:campaign_report": ("get", "/campaigns/{campaign}/report.html", "viewer", 200),
    # No Chromium in this test (_no_pdf_printing): past the role check, a PDF is a 503.
    "campaigns:campaign_report_pdf": ("get", "/campaigns/{campaign}/report.pdf", "viewer", 503),
    "campaigns:run_report": ("get", "/campaigns/runs/{finished_run}/report.html", "viewer", 200),
    "campaigns:run_report_pdf": ("get", "/campaigns/runs/{finished_run}/report.pdf", "viewer", 503),
    "campaigns:compare_report": ("get", "/campaigns/compare/report.html?runs={run},{finished_run}", "viewer", 200),
    "campaigns:compare_report_pdf": ("get", "/campaigns/compare/report.pdf?runs={run},{finished_run}", "viewer", 503),
    "campaigns:campaign_schedule": ("get", "/campaigns/{campaign}/schedule/", "viewer", 200),
    "campaigns:campaign_schedule#post": ("post", "/campaigns/{campaign}/schedule/", "admin", 400),
    "campaigns:campaign_edit": ("get", "/campaigns/{campaign}/edit/", "admin", 200),
    "campaigns:campaign_clone": ("get", "/campaigns/{campaign}/clone/", "admin", 200),
    "campaigns:campaign_start": ("post", "/campaigns/{campaign}/start/", "operator", 302),
    "campaigns:campaign_new_normal": ("post", "/campaigns/{campaign}/new-normal/", "operator", 302),
    "campaigns:run_list": ("get", "/campaigns/runs/", "viewer", 200),
    "campaigns:run_detail": ("get", "/campaigns/runs/{run}/", "viewer", 200),
    "campaigns:run_progress": ("get", "/campaigns/runs/{run}/progress/", "viewer", 200),
    "campaigns:run_cancel": ("post", "/campaigns/runs/{finished_run}/cancel/", "operator", 302),
    "campaigns:run_retry_failed": ("post", "/campaigns/runs/{finished_run}/retry-failed/", "operator", 302),
    # An empty form, and a run with no results to judge: refused with a message on the run page.
    "campaigns:run_baseline": ("post", "/campaigns/runs/{finished_run}/baseline/", "operator", 302),
    "campaigns:run_judge_again": ("post", "/campaigns/runs/{finished_run}/judge-again/", "operator", 302),
    "campaigns:run_transfers": ("get", "/campaigns/runs/{run}/transfers/", "viewer", 200),
    "campaigns:run_errors": ("get", "/campaigns/runs/{run}/errors/transfer_timeout/", "viewer", 200),
    "campaigns:run_chart": ("get", "/campaigns/runs/{run}/charts/steps.json", "viewer", 200),
    "campaigns:run_charts_bundle": ("get", "/campaigns/runs/{run}/charts.json", "viewer", 200),
    "campaigns:compare": ("get", "/campaigns/compare/", "viewer", 200),
    "campaigns:status": ("get", "/campaigns/status/", "viewer", 200),
    "campaigns:compare_data": ("get", "/campaigns/compare/data.json?runs={run},{finished_run}", "viewer", 200),
    "campaigns:backend_list": ("get", "/campaigns/backends/", "viewer", 200),
    "campaigns:backend_detail": ("get", "/campaigns/backends/{backend}/", "viewer", 200),
    "campaigns:endpoint_detail": ("get", "/campaigns/endpoints/{endpoint}/", "viewer", 200),
    # A mock endpoint is refused with a message on the endpoint's page: no check is queued.
    "campaigns:readiness_start": ("post", "/campaigns/endpoints/{endpoint}/readiness/", "operator", 302),
    "campaigns:readiness_detail": ("get", "/campaigns/readiness/{check}/", "viewer", 200),
    "campaigns:readiness_cancel": ("post", "/campaigns/readiness/{check}/cancel/", "operator", 302),
    "campaigns:readiness_grid": ("get", "/campaigns/readiness/grid/", "viewer", 200),
    "campaigns:readiness_grid_detail": ("get", "/campaigns/readiness/grid/{grid}/", "viewer", 200),
    "campaigns:readiness_grid_start": ("post", "/campaigns/readiness/grid/start/", "operator", 302),
    # An empty form turns the daily grid off.
    "campaigns:readiness_grid_schedule": ("post", "/campaigns/readiness/grid/schedule/", "operator", 302),
    "collectors:host_list": ("get", "/hosts/", "viewer", 200),
    "collectors:host_detail": ("get", "/hosts/{host}/", "viewer", 200),
    "collectors:host_metrics": ("get", "/hosts/{host}/metrics.json", "viewer", 200),
    "collectors:host_test_start": ("post", "/hosts/{host}/tests/", "operator", 400),  # an empty form
    "collectors:host_test_detail": ("get", "/hosts/tests/{series}/", "viewer", 200),
    "collectors:host_test_results": ("get", "/hosts/tests/{series}/results/", "viewer", 200),
    "collectors:host_test_chart": ("get", "/hosts/tests/{series}/chart.json", "viewer", 200),
    "collectors:host_test_cancel": ("post", "/hosts/tests/{series}/cancel/", "operator", 302),
    "collectors:event_list": ("get", "/hosts/events/", "viewer", 200),
    "collectors:event_create": ("get", "/hosts/events/new/", "operator", 200),
    "collectors:event_create#post": ("post", "/hosts/events/new/", "operator", 200),
    "alerts:subscription_list": ("get", "/alerts/", "viewer", 200),
    "alerts:subscription_create": ("get", "/alerts/new/", "admin", 200),
    "alerts:subscription_create#post": ("post", "/alerts/new/", "admin", 400),  # an empty form
    "alerts:subscription_edit": ("get", "/alerts/{subscription}/edit/", "admin", 200),
    "alerts:subscription_delete": ("post", "/alerts/{subscription}/delete/", "admin", 302),
    # Mailed through the test settings' in-memory backend: nothing leaves the machine.
    "alerts:subscription_test": ("post", "/alerts/{subscription}/test/", "admin", 302),
}


def _routes(resolver: URLResolver | None = None, namespace: str = "") -> set[str]:
    """The qualified name of every route, leaving out the admin (its own rules: is_staff and
    each model's permissions) and the API's viewsets (their matrix is built from the schema)."""
    names = set()
    for pattern in (resolver or get_resolver()).url_patterns:
        if isinstance(pattern, URLResolver):
            if pattern.namespace == "admin":
                continue
            inner = f"{namespace}{pattern.namespace}:" if pattern.namespace else namespace
            names |= _routes(pattern, inner)
        elif isinstance(pattern, URLPattern):
            if hasattr(pattern.callback, "actions"):  # a DRF viewset route
                continue
            assert pattern.name, f"route {pattern.pattern} has no name: name it and give it a row"
            names.add(f"{namespace}{pattern.name}")
    return names


def test_the_matrix_covers_every_route():
    assert _routes() - {name.split("#")[0] for name in MATRIX} == set()


@pytest.fixture
def objects():
    campaign = mock_campaign("pages")
    other = User.objects.create_user("someone-else")
    other.groups.add(Group.objects.get(name="viewer"))
    source = campaign.sources.first()
    return {
        "campaign": campaign,
        "run": Run.objects.create(campaign=campaign),
        "finished_run": Run.objects.create(campaign=campaign, state="succeeded"),
        "backend": source.backend,
        "endpoint": source,
        "host": (host := Host.objects.create(name="pages-door")),
        "series": HostTestSeries.objects.create(host=host, tool="dd", params={"tool": "dd"}, repeats=1, byte_budget=1),
        "event": log_event("note", "pages note"),
        "foreign_token": tokens.create_token(other, "theirs", "viewer")[0],
        "check": (check := ReadinessCheck.objects.create(endpoint=endpoint("pages-root", "root://127.0.0.1:1//data/"))),
        "grid": (grid := ReadinessGrid.objects.create()),
        "_grid_check": ReadinessCheck.objects.create(endpoint=check.endpoint, grid=grid),
        "subscription": Subscription.objects.create(name="pages", campaign=campaign, email="pages@example.org"),
    }


@pytest.fixture(autouse=True)
def _no_pdf_printing(settings):
    settings.STORAGEOPS_CHROMIUM = "/nonexistent/chromium"


@pytest.mark.parametrize("name", list(MATRIX))
def test_page_role_matrix(objects, viewer, operator, admin_user, outsider, name):
    """Every persona asks the route on the same objects, each in a savepoint rolled back after
    it (as tests/api/test_permissions.py): one persona's deletion is undone before the next."""
    method, template, needs, ok = MATRIX[name]
    users = {"no-role": outsider, "viewer": viewer, "operator": operator, "admin": admin_user}
    path = template.format(**{k: v.pk for k, v in objects.items()})
    wrong = []
    for who in LEVEL:
        client = Client()
        with transaction.atomic():
            if who != "anonymous":
                client.force_login(users[who])
            response = getattr(client, method)(path)
            transaction.set_rollback(True)
        problem = _refusal_problem(response, who, path) if LEVEL[who] < NEEDS[needs] else None
        allowed = (ok,) if isinstance(ok, int) else ok
        if LEVEL[who] >= NEEDS[needs] and response.status_code not in allowed:
            problem = f"{response.status_code}, expected one of {allowed}"
        if problem:
            content = b"(streamed)" if response.streaming else response.content[:300]
            wrong.append(f"{who}: {problem}: {content!r}")
    assert not wrong, f"{method.upper()} {path}\n" + "\n".join(wrong)


def _refusal_problem(response, who: str, path: str) -> str | None:
    """What is wrong with how a persona without the route's role was refused, or None."""
    if path.startswith("/api/"):
        # DRF: no credentials is 401 (it names the Token scheme), credentials without the role 403.
        expected = 401 if who == "anonymous" else 403
        if response.status_code != expected:
            return f"{response.status_code}, expected {expected}"
        if set(response.json()["error"]) != {"status", "message", "fields"}:
            return "not the API's error shape"
        return None
    if who == "anonymous":
        if response.status_code != 302 or not response["Location"].startswith("/login/?next="):
            return f"{response.status_code}, expected a redirect to the login page"
        return None
    if response.status_code != 403:
        return f"{response.status_code}, expected 403"
    if who == "no-role":
        if "ask an admin" not in response.content.decode():
            return "the refusal does not say to ask an admin"
        if path.endswith(".json") and response.json()["error"]["status"] != 403:
            return "the JSON refusal does not carry its status"
    return None

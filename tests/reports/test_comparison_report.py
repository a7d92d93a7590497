"""A comparison's report: three runs into three backends, trimmed and against a chosen axis,
carrying the compare page's table cell for cell, its choice, and no secret; through the web and
the API (tests/browser/test_report_browser.py opens it offline)."""

from __future__ import annotations

import re

import pytest

from storageops import roles
from tests.reports.test_run_report import _cells
from tests.support.api import api
from tests.support.report_runs import BACKENDS, TOKEN, compare_query, three_backend_runs

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def three_runs():
    return three_backend_runs()


def test_the_comparison_report_is_the_compare_page(client, viewer, three_runs):
    client.force_login(viewer)
    page = client.get(f"/campaigns/compare/?{compare_query(three_runs)}").content.decode()
    link = re.search(r'id="download-report" href="([^"]+)"', page).group(1).replace("&amp;", "&")
    assert link.startswith("/campaigns/compare/report.html?")
    web = client.get(link)
    assert web.status_code == 200
    ids = "-".join(str(r.pk) for r in three_runs)
    assert web["Content-Disposition"] == f'attachment; filename="storageops-report-comparison-{ids}.html"'
    html = web.content.decode()
    assert _cells(html, "compare-table") == _cells(page, "compare-table")
    for name in BACKENDS:
        assert name in html
    assert 'data-choice="x">concurrency<' in html
    assert TOKEN not in html
    by_api = api(viewer, roles.VIEWER).get(f"/api/v1/compare/report.html?{compare_query(three_runs)}")
    assert by_api.status_code == 200 and _cells(by_api.content.decode(), "compare-table") == _cells(
        page, "compare-table"
    )
    bad = api(viewer, roles.VIEWER).get("/api/v1/compare/report.html?runs=x")
    assert bad.status_code == 400 and "runs" in bad.json()["error"]["fields"]

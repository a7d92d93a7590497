"""A comparison's report and a campaign history's: three runs into three backends, trimmed and against a chosen axis,
carrying the compare page's table cell for cell, its choice, and no secret; through the web and
the API (tests/browser/test_report_browser.py opens it offline)."""

from __future__ import annotations

import json
import re

import pytest

from storageops import roles
from tests.reports.test_run_report import _cells
from tests.support.api import api
from tests.support.factories import mock_campaign
from tests.support.report_runs import BACKENDS, TOKEN, compare_query, three_backend_runs
from tests.support.runs import drive

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


def test_a_campaigns_history_report(client, viewer):
    runs = [drive(mock_campaign("hist", file_count=6, concurrency_steps=[2]))]
    runs += [drive(runs[0].campaign) for _ in range(3)]
    client.force_login(viewer)
    page = client.get(runs[0].campaign.get_absolute_url()).content.decode()
    assert f'href="/campaigns/{runs[0].campaign_id}/report.html"' in page
    by_api = api(viewer, roles.VIEWER).get(f"/api/v1/campaigns/{runs[0].campaign_id}/report.html")
    assert by_api.status_code == 200
    html = by_api.content.decode()
    rows = _cells(html, "history-table")
    assert [r[0] for r in rows] == [f"#{r.pk}" for r in runs]
    # The chart's data for every figure it offers is in the file: the figure choice works offline.
    documents = json.loads(re.search(r'id="chart-documents"[^>]*>(.*?)</script>', html, re.S).group(1))
    url = f"/campaigns/{runs[0].campaign_id}/history.json?figure="
    offered = {f"{url}{f['key']}" for f in documents[f"{url}throughput"]["figures"]}
    assert {f"{url}error_rate", f"{url}step_throughput_2"} <= offered <= set(documents)
    assert all(doc["campaign"] == runs[0].campaign_id for doc in documents.values())

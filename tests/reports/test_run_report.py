"""A run's report through the web and the API: who may have it, what it carries (provenance,
the run page's step table, the host figures per step, the change log), no secret, and a
bounded read of the run (never a scan of its transfer rows)."""

from __future__ import annotations

import json
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from campaigns.reports import content, render
from storageops import roles
from tests.support.api import api
from tests.support.report_runs import PROXY, SECRETS, reported_run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def run():
    return reported_run()


def _cells(html: str, table_id: str) -> list[list[str]]:
    """The text of each body row's cells of one table."""
    table = re.search(rf'<table[^>]* id="{table_id}"[^>]*>(.*?)</table>', html, re.S).group(1)
    body = re.search(r"<tbody>(.*?)</tbody>", table, re.S).group(1)
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S)
    return [[re.sub(r"<[^>]+>|\s+", " ", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", r, re.S)] for r in rows]


def test_viewer_downloads_the_report_from_the_page_and_the_api(client, viewer, run):
    client.force_login(viewer)
    page = client.get(run.get_absolute_url()).content.decode()
    assert f'href="/campaigns/runs/{run.pk}/report.html"' in page
    web = client.get(f"/campaigns/runs/{run.pk}/report.html")
    assert web.status_code == 200
    assert web["Content-Disposition"] == f'attachment; filename="storageops-report-run-{run.pk}.html"'
    by_api = api(viewer, roles.VIEWER).get(f"/api/v1/runs/{run.pk}/report.html", HTTP_ACCEPT="text/html")
    assert by_api.status_code == 200 and by_api["Content-Type"].startswith("text/html")
    html = web.content.decode()
    # Provenance first: the site, the version, the run and its times, who made it.
    header = html[html.index('id="provenance"') : html.index("</header>")]
    assert 'data-provenance="site">site<' in header
    assert f"#{run.pk} report (succeeded), {run.started_at:%Y-%m-%d %H:%M:%S}" in header
    assert "by vera-viewer" in header
    # The same step table as the run page, cell for cell.
    assert _cells(html, "step-table") == _cells(page, "step-table")
    assert len(_cells(html, "step-table")) == 2


def test_the_report_needs_a_role(client, outsider, viewer, run):
    client.force_login(outsider)
    assert client.get(f"/campaigns/runs/{run.pk}/report.html").status_code == 403
    assert api(viewer, roles.VIEWER).get("/api/v1/runs/999999/report.html").status_code == 404
    anonymous = client.__class__().get(f"/api/v1/runs/{run.pk}/report.html")
    assert anonymous.status_code in (401, 403)
    assert anonymous["Content-Type"] == "application/json"


def test_host_figures_per_step_and_the_change_log(client, viewer, run):
    client.force_login(viewer)
    html = client.get(f"/campaigns/runs/{run.pk}/report.html").content.decode()
    figures = _cells(html, "host-figures-table")
    first_step = {row[4]: row[5] for row in figures if row[0] == "0"}
    assert first_step == {
        "CPU (all cores) on report-door": "40.0 %",
        "CPU of xrootd on report-door": "30.0 %",  # 60 % of its 2 cores
        "disk sda busy on report-door": "25.0 %",
        "network eth0 on report-door": "10.0 %",  # 1 Gbit/s of 10
    }
    events = _cells(html, "event-table")
    assert ["Config change", "report-door", "xrootd.cfg: xrd.sched maxt raised"] in [e[1:] for e in events]


def test_the_report_carries_no_secret(client, viewer, run):
    # The run froze the proxy path: a report that printed its snapshot whole would leak it.
    assert PROXY in json.dumps(run.snapshot)
    client.force_login(viewer)
    html = client.get(f"/campaigns/runs/{run.pk}/report.html").content.decode()
    for secret in SECRETS:
        assert secret not in html
    assert "yes (not shown)" in html  # the destination has a token, said without it


def test_the_report_reads_no_transfer_row_but_the_scatter_sample(run, viewer):
    with CaptureQueriesContext(connection) as queries:
        html = render.render_html(content.run_report(run, viewer))
    assert len(html) < 1_000_000
    transfer_reads = [q["sql"] for q in queries.captured_queries if 'FROM "campaigns_transfer"' in q["sql"]]
    # The duration-vs-size chart looks up a bounded sample by its unique key; nothing else is read.
    assert len(transfer_reads) == 1 and '"campaigns_transfer"."index" IN' in transfer_reads[0]


def test_frozen_set_up_leaves_out_what_names_a_secret(run):
    frozen = content.frozen(run)
    destination = frozen["destinations"][0]
    assert "x509_proxy" in run.snapshot["destinations"][0] and "x509_proxy" not in destination
    assert destination["has_token"] is True and destination["name"] == "report-dst"
    assert [key for key in frozen["parameters"] if content.is_secret(key)] == []
    assert content.is_secret("bearer_token") and content.is_secret("ca_dir") and not content.is_secret("has_token")

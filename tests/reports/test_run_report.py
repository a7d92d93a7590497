"""A run's report through the web and the API: who may have it, what it carries (provenance,
the run page's step table, the host figures per step, the change log), no secret, and a
bounded read of the run (never a scan of its transfer rows)."""

from __future__ import annotations

import json
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from campaigns.models import Run, Transfer
from campaigns.reports import content, render
from campaigns.results import analysis
from campaigns.runs.engines.gfal2.client import Gfal2Copier
from storageops import roles
from tests.support.api import api
from tests.support.factories import mock_campaign
from tests.support.report_runs import PROXY, SECRETS, reported_run
from tests.support.runs import drive

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


def _pages(client, viewer, run) -> tuple[str, str, str]:
    """The run page, its transfers table and the run's report, as a viewer gets them."""
    client.force_login(viewer)
    page = client.get(run.get_absolute_url()).content.decode()
    transfers = client.get(f"/campaigns/runs/{run.pk}/transfers/").content.decode()
    report = client.get(f"/campaigns/runs/{run.pk}/report.html").content.decode()
    return page, transfers, report


def test_the_copy_mode_each_copy_used_per_step_and_per_transfer_on_the_page_and_in_the_report(
    client, viewer, monkeypatch
):
    # The mock plugin reports no mode: say what a davs door's gfal2 would, two copies of the
    # second step falling back to streaming, as the real copier records it.
    real_copy = Gfal2Copier.copy

    def reporting(self, job):
        result = real_copy(self, job)
        result.copy_mode = "streamed" if job.step == 1 and job.index % 5 == 0 else "3rd pull"
        return result

    monkeypatch.setattr(Gfal2Copier, "copy", reporting)
    run = drive(mock_campaign("modes", file_count=20, concurrency_steps=[1, 2], step_files=10, tpc_mode="pull"))
    rows = Transfer.objects.filter(run=run)
    assert sorted(rows.filter(copy_mode="streamed").values_list("step", "index")) == [(1, 10), (1, 15)]
    assert [(s["mode_asked"], s["copy_modes"]) for s in run.summary["steps"]] == [
        ("pull", {"3rd pull": 10}),
        ("pull", {"3rd pull": 8, "streamed": 2}),
    ]
    page, transfers, report = _pages(client, viewer, run)
    for html in (page, report):
        assert [row[-2:] for row in _cells(html, "step-table")] == [
            ["pull", "3rd pull"],
            ["pull", "3rd pull 8, streamed 2"],
        ]
    assert _cells(report, "step-table") == _cells(page, "step-table")
    shown = dict(re.findall(r'<tr><td class="num">(\d+)</td>.*?data-mode>([^<]*)<', transfers, re.S))
    assert shown == {str(t.index): t.copy_mode for t in rows}
    assert shown["15"] == "streamed" and shown["3"] == "3rd pull"


def test_a_pooled_runs_report_has_the_clients_table_of_its_page(client, viewer):
    # A pool of two clients as the driver leaves it (tests/campaigns/runs/test_client_pool.py
    # runs real ones): each transfer ended by one, the summary computed from the rows, and what
    # each client's worker used beside it, c2 lost mid-run.
    run = drive(mock_campaign("pooled", file_count=12, concurrency_steps=[2]))
    Transfer.objects.filter(run=run, index__lt=8).update(transfer_host="c1")
    Transfer.objects.filter(run=run, index__gte=8).update(transfer_host="c2")
    snapshot = {**run.snapshot, "clients": [{"name": "c1", "weight": 2}, {"name": "c2", "weight": 1}]}
    Run.objects.filter(pk=run.pk).update(snapshot=snapshot)
    run = Run.objects.get(pk=run.pk)
    pool = {
        "c1": {"weight": 2, "cpu_seconds": 3.4, "nic": {"eth0": [1_000_000, 2_000_000]}, "lost": ""},
        "c2": {"weight": 1, "cpu_seconds": 1.5, "nic": {"eth0": [500_000, 0]}, "lost": "no heartbeat for 30 s"},
    }
    Run.objects.filter(pk=run.pk).update(summary={**run.summary, **analysis.run_summary(run), "client_pool": pool})
    run = Run.objects.get(pk=run.pk)
    figures = run.summary["clients"]
    assert {name: f["files_ok"] for name, f in figures.items()} == {"c1": 8, "c2": 4}
    page, _, report = _pages(client, viewer, run)
    table = _cells(report, "client-table")
    assert table == _cells(page, "client-table")
    assert [row[:4] for row in table] == [["c1", "2", "8", "0"], ["c2", "1", "4", "0"]]
    assert [row[7] for row in table] == ["3.4 s", "1.5 s"]
    assert [row[-1] for row in table] == ["", "no heartbeat for 30 s"]
    assert 'data-client="c2" class="bad"' in report


def test_a_run_without_a_pool_has_no_clients_table(client, viewer, run):
    page, _, report = _pages(client, viewer, run)
    assert 'id="client-table"' not in page and 'id="client-table"' not in report

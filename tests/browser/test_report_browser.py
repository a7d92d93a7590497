"""A run's report opened from a file:// URL in Chromium with every request but the file itself
refused: its charts are drawn (from the data inside it, by the dashboard's own Chart.js and
charts.js), they hold the same data as the run page's, its step table gives the API's figures,
and its PDF prints. Writes docs/screenshots/report-run-offline.png and report-run-pdf-page1.png."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from storageops import roles, units
from tests.browser.test_dashboard_browser import SCREENSHOTS, log_in
from tests.support.api import api
from tests.support.factories import mock_campaign
from tests.support.report_runs import compare_query, reported_run, three_backend_runs
from tests.support.runs import drive

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

# The charts the reported run has data for (its door samples: CPU, daemon CPU, disk, network).
DRAWN = ("throughput", "active", "steps", "scatter", "door-cpu", "door-network", "daemon-cpu", "door-disks")


def _offline(page, url: str) -> list[str]:
    """Refuse every request but `url`; the list of refused requests fills as the page asks."""
    refused: list[str] = []

    def route(r):
        if r.request.url == url:
            r.continue_()
        else:
            refused.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    return refused


def _datasets(page, name: str):
    selector = f'canvas[data-chart="{name}"]'
    page.wait_for_function(f"() => document.querySelector('{selector}')._chart !== undefined", timeout=15_000)
    return page.evaluate(
        f"""() => document.querySelector('{selector}')._chart.data.datasets.map(
               d => ({{label: d.label, data: d.data}}))"""
    )


def _painted(page, name: str) -> int:
    """How many pixels of the chart's canvas are painted (not transparent)."""
    return page.evaluate(
        f"""() => {{ const c = document.querySelector('canvas[data-chart="{name}"]');
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; let n = 0;
        for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++; return n; }}"""
    )


def test_the_report_opens_offline_with_the_dashboards_charts(page, browser, live_server, viewer, tmp_path):
    run = reported_run("offline")
    client = api(viewer, roles.VIEWER)
    answer = client.get(f"/api/v1/runs/{run.pk}/report.html")
    assert answer.status_code == 200
    report = tmp_path / "report.html"
    report.write_bytes(answer.content)

    url = report.as_uri()
    refused = _offline(page, url)
    page.goto(url)
    drawn = {name: _datasets(page, name) for name in DRAWN}
    for name in DRAWN:
        assert _painted(page, name) > 2000, name
    # The steps are drawn at what they achieved, and the axis still holds their targets (a step
    # far below its target once squeezed the plot into a sliver beside ticks out of range).
    lo, hi = page.evaluate("""() => { const s = document.querySelector('canvas[data-chart="steps"]')._chart.scales.x;
                                      return [s.min, s.max]; }""")
    points = drawn["steps"][0]["data"]
    assert lo <= min(p["x"] for p in points) and hi >= max(p["target"] for p in points) >= max(p["x"] for p in points)
    # Charts without data say so, as on the page, instead of failing.
    assert "No sample from the doors' collectors" in page.inner_text('figure:has(canvas[data-chart="door-load"])')
    assert refused == [] and page.js_errors == []

    # Its step table gives the API's figures of the run.
    steps = client.get(f"/api/v1/runs/{run.pk}/").json()["summary"]["steps"]
    rows = [r.locator("td").all_inner_texts() for r in page.locator("#step-table tbody tr").all()]
    assert [(r[1], r[5], r[6], r[9]) for r in rows] == [
        (str(s["concurrency"]), str(s["files_ok"]), str(s["files_failed"]), units.human_rate(s["throughput_bps"]))
        for s in steps
    ]
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "report-run-offline.png"), full_page=True)

    # The run page draws the same data in the same charts.
    dashboard = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    log_in(dashboard, live_server, viewer.username)
    dashboard.goto(f"{live_server.url}{run.get_absolute_url()}")
    for name in DRAWN:
        assert _datasets(dashboard, name) == drawn[name], name
    dashboard.context.close()


def test_the_pdf_prints_the_report(client, viewer, tmp_path):
    run = reported_run("printed")
    client.force_login(viewer)
    answer = client.get(f"/campaigns/runs/{run.pk}/report.pdf")
    assert answer.status_code == 200, answer.content[:500]
    assert answer["Content-Type"] == "application/pdf" and answer.content.startswith(b"%PDF")
    assert answer["Content-Disposition"] == f'attachment; filename="storageops-report-run-{run.pk}.pdf"'
    pdf = tmp_path / "report.pdf"
    pdf.write_bytes(answer.content)
    if shutil.which("pdftoppm") is None:
        pytest.skip("poppler-utils (pdftoppm) is not installed: the PDF's pages are not rendered to PNG")
    subprocess.run(["pdftoppm", "-png", "-r", "60", str(pdf), str(tmp_path / "page")], check=True)
    pages = sorted(tmp_path.glob("page-*.png"))
    assert len(pages) >= 4
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for number in (1, 3, 4):
        shutil.copy(pages[number - 1], SCREENSHOTS / f"report-run-pdf-page{number}.png")


def test_no_chromium_is_a_clear_503(client, viewer, settings, tmp_path):
    run = reported_run("nochrome")
    settings.STORAGEOPS_CHROMIUM = str(tmp_path / "no-such-chromium")
    client.force_login(viewer)
    answer = client.get(f"/api/v1/runs/{run.pk}/report.pdf")
    assert answer.status_code == 503
    assert "PDF reports need Chromium" in answer.json()["error"]["message"]
    client.force_login(viewer)
    page = client.get(f"/campaigns/runs/{run.pk}/report.pdf")
    assert page.status_code == 503 and "PDF reports need Chromium" in page.content.decode()


def test_the_comparison_report_draws_offline(page, browser, live_server, viewer, tmp_path):
    three_runs = three_backend_runs()
    answer = api(viewer, roles.VIEWER).get(f"/api/v1/compare/report.html?{compare_query(three_runs)}")
    report = tmp_path / "comparison.html"
    report.write_bytes(answer.content)
    refused: list[str] = []
    page.route(
        "**/*",
        lambda r: r.continue_() if r.request.url == report.as_uri() else (refused.append(r.request.url), r.abort()),
    )
    page.goto(report.as_uri())
    drawn = {}
    for name in ("compare-steps", "compare-time"):
        selector = f'canvas[data-chart="{name}"]'
        page.wait_for_function(f"() => document.querySelector('{selector}')._chart !== undefined", timeout=15_000)
        drawn[name] = page.evaluate(f"() => document.querySelector('{selector}')._chart.data.datasets.map(d => d.data)")
        assert len(drawn[name]) >= 3, name
    assert refused == [] and page.js_errors == []
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "report-comparison-offline.png"), full_page=True)
    dashboard = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    log_in(dashboard, live_server, viewer.username)
    dashboard.goto(f"{live_server.url}/campaigns/compare/?{compare_query(three_runs)}")
    for name, data in drawn.items():
        selector = f'canvas[data-chart="{name}"]'
        dashboard.wait_for_function(f"() => document.querySelector('{selector}')._chart !== undefined")
        assert (
            dashboard.evaluate(f"() => document.querySelector('{selector}')._chart.data.datasets.map(d => d.data)")
            == data
        )
    dashboard.context.close()


def test_the_history_report_changes_figure_offline(page, viewer, tmp_path):
    first = drive(mock_campaign("hist-offline", file_count=6, concurrency_steps=[2]))
    for _ in range(3):
        drive(first.campaign)
    answer = api(viewer, roles.VIEWER).get(f"/api/v1/campaigns/{first.campaign_id}/report.html")
    report = tmp_path / "history.html"
    report.write_bytes(answer.content)
    refused = _offline(page, report.as_uri())
    page.goto(report.as_uri())
    points = _datasets(page, "history")[-1]["data"]
    assert len(points) == 4
    assert _painted(page, "history") > 2000
    # The figure choice redraws from the file's own data.
    page.select_option('select[name="figure"]', "error_rate")
    chart = "document.querySelector('canvas[data-chart=\"history\"]')._chart"
    page.wait_for_function(f"() => {chart}.options.scales.y.title.text === 'error rate'")
    assert refused == [] and page.js_errors == []
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "report-history-offline.png"), full_page=True)

"""The chart registry (campaigns.web.chart_registry) is the one list of each page's charts: the
pages render exactly its canvases, each names a drawer that static/js/charts.js has and JSON
documents that answer, and the run page's documents are the ones its charts read."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from campaigns import runs
from campaigns.runs.lifecycle import RunDriver
from campaigns.web import chart_registry
from collectors import host_charts
from collectors.models import Host
from tests.support.factories import mock_campaign

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]


class _Canvases(HTMLParser):
    """The chart canvases of a page (their data-* attributes) and its chart parameters."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.canvases: list[dict[str, str]] = []
        self.params: dict[str, str] = {}
        self._select: str | None = None
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        if tag == "canvas":
            self.canvases.append(found)
        elif tag == "select" and "data-chart-param" in found:
            self._select = found["name"]
        elif tag == "option" and self._select and self._select not in self.params:
            self.params[self._select] = found["value"]


def _drawers_in_charts_js() -> set[str]:
    source = (ROOT / "static/js/charts.js").read_text()
    table = re.search(r"var DRAW = \{(.*?)\};", source, re.S)
    assert table, "charts.js has no DRAW table"
    return set(re.findall(r'"([\w-]+)":\s*\w+', table.group(1)))


def _drive(name: str, **fields):
    run = runs.create_run(mock_campaign(name, **fields), trigger="command")
    RunDriver(run.pk).drive()
    run.refresh_from_db()
    return run


def _check_canvases(client, html: str) -> list[dict[str, str]]:
    """Every canvas has a unique data-chart, a drawer charts.js knows, and documents that answer JSON."""
    page = _Canvases(html)
    names = [c.get("data-chart") for c in page.canvases]
    assert all(names) and len(names) == len(set(names)), names
    assert {c["data-draw"] for c in page.canvases} <= _drawers_in_charts_js()
    asked = "&".join(f"{k}={v}" for k, v in page.params.items())
    for canvas in page.canvases:
        for url in json.loads(canvas["data-sources"]).values():
            url = f"{url}{'&' if '?' in url else '?'}{asked}" if asked else url
            answer = client.get(url, HTTP_ACCEPT="application/json")
            assert answer.status_code == 200 and answer["Content-Type"] == "application/json", (canvas, url)
    return page.canvases


def test_every_drawer_a_page_names_is_in_charts_js_and_every_drawer_is_used():
    declared = {c.draw for c in (*chart_registry.RUN_CHARTS, *chart_registry.COMPARE_CHARTS,
                                 *chart_registry.HISTORY_CHARTS, *host_charts.HOST_CHARTS)}  # fmt: skip
    # The host test's page writes its one canvas in its template.
    for template in (ROOT / "templates/collectors").glob("*.html"):
        declared |= set(re.findall(r'data-draw="([\w-]+)"', template.read_text()))
    assert declared == _drawers_in_charts_js()


def test_the_run_page_draws_each_registered_chart_once_from_the_registered_documents(client, viewer):
    run = _drive("registry", dst_query="time=0.01", file_count=20, concurrency_steps=[1, 2], step_files=10)
    client.force_login(viewer)
    html = client.get(run.get_absolute_url()).content.decode()
    canvases = _check_canvases(client, html)
    # Not a sweep over more than concurrency: every chart but the sweep's second view, in order.
    assert [c["data-chart"] for c in canvases] == [c.name for c in chart_registry.RUN_CHARTS if not c.needs]
    # Each document the run_chart view serves is read by some chart, and no chart reads another.
    read = {name for c in canvases for name in json.loads(c["data-sources"])}
    assert read == set(chart_registry.RUN_DOCUMENTS)
    assert client.get(f"/campaigns/runs/{run.pk}/charts/nosuch.json").status_code == 404
    # The options reach the drawers as data-* attributes (the host page's canvases read the same).
    daemon = next(c for c in canvases if c["data-chart"] == "daemon-cpu")
    assert (daemon["data-labelled"], daemon["data-limit"], daemon["data-unit"]) == (
        "proc.cpu_percent", "proc.cpus_allowed", "%"
    )  # fmt: skip


def test_a_sweeps_second_view_is_bound_to_its_axis():
    values = {"axis": "streams", "axis_label": "streams", "per_setting": ", one line per streams"}
    urls = {name: f"/{name}.json" for name in chart_registry.RUN_DOCUMENTS}
    bound = {c.name: c for c in chart_registry.bind(chart_registry.RUN_CHARTS, values, urls)}
    by_axis = bound["steps-by-axis"]
    assert by_axis.title == "Throughput vs streams" and dict(by_axis.options) == {
        "axis": "streams", "axis-label": "streams"
    }  # fmt: skip
    assert by_axis.figure_id == "sweep-matrix" and json.loads(by_axis.sources_json) == {"steps": "/steps.json"}
    assert bound["steps"].note == "one point per step, one line per streams"
    unswept = chart_registry.bind(chart_registry.RUN_CHARTS, {**values, "axis": ""}, urls)
    assert "steps-by-axis" not in {c.name for c in unswept}


def test_the_comparison_and_campaign_pages_draw_their_registered_charts(client, viewer):
    a = _drive("registry-a", dst_query="time=0.01", file_count=10, concurrency_steps=[1, 2], step_files=5)
    b = _drive("registry-b", dst_query="time=0.01", file_count=10, concurrency_steps=[1, 2], step_files=5)
    client.force_login(viewer)
    compare = client.get("/campaigns/compare/", {"runs": f"{a.pk},{b.pk}", "warmup": 1})
    canvases = _check_canvases(client, compare.content.decode())
    assert [c["data-chart"] for c in canvases] == [c.name for c in chart_registry.COMPARE_CHARTS]
    # The charts' data is asked with the table's trim.
    assert all("warmup=1" in json.loads(c["data-sources"])["compare"] for c in canvases)
    history = client.get(a.campaign.get_absolute_url()).content.decode()
    assert 'name="figure" data-chart-param' in history
    canvases = _check_canvases(client, history)
    assert [c["data-chart"] for c in canvases] == [c.name for c in chart_registry.HISTORY_CHARTS]


def test_the_host_page_draws_its_registered_charts_from_the_hosts_metrics(client, viewer):
    host = Host.objects.create(name="chart-host", address="127.0.0.1")
    client.force_login(viewer)
    html = client.get(f"/hosts/{host.pk}/?range=1h").content.decode()
    canvases = _check_canvases(client, html)
    assert [c["data-chart"] for c in canvases] == [c.name for c in host_charts.HOST_CHARTS]
    assert all("range=1h" in json.loads(c["data-sources"])["host"] for c in canvases)

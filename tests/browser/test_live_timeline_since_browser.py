"""The run page's charts ask a live timeline from their last point on (issue 46): the second
round sends since= and bucket=, is answered with the newer buckets alone, and the chart shows
the old points and the new ones together. The page asks all its documents in one request."""

from __future__ import annotations

import pytest

from campaigns import runs
from campaigns.models import Run
from campaigns.web import chart_registry
from tests.browser.test_dashboard_browser import log_in
from tests.support.factories import mock_campaign

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_the_page_asks_the_timeline_since_its_last_point_and_merges_it(page, live_server, viewer, monkeypatch):
    run = runs.create_run(mock_campaign("since-browser"), trigger="command")
    Run.objects.filter(pk=run.pk).update(state="running", files_done=3)
    asked: list[int] = []

    def growing(run_):
        # One bucket more at each computation: 30 s buckets from 2026-01-01 on.
        asked.append(1)
        n = 3 + len(asked)
        times = [1_767_225_600_000.0 + (i + 0.5) * 30_000 for i in range(n)]
        values = [1e6 * (i + 1) for i in range(n)]
        return {"bucket_seconds": 30, "times": times, "doors": {"a": values}, "total": values, "rolling": values,
                "rolling_buckets": 5, "active": [1.0] * n, "failures": [0] * n}  # fmt: skip

    monkeypatch.setitem(chart_registry.RUN_DOCUMENTS, "timeline", growing)
    timeline_urls: list[str] = []
    page.on(
        "request", lambda r: timeline_urls.append(r.url) if "/campaigns/runs/" in r.url and "/charts" in r.url else None
    )
    log_in(page, live_server, viewer.username)
    page.goto(f"{live_server.url}/campaigns/runs/{run.pk}/")
    # The second round (5 s on) asks from the last point the page holds, in its bucket width.
    page.wait_for_event("request", lambda r: "since=" in r.url and "/charts.json" in r.url, timeout=12_000)
    first, second = timeline_urls[0], next(u for u in timeline_urls if "since=" in u)
    assert "since=" not in first and "bucket=30" in second
    # One request a round, not one a document.
    assert all(f"/runs/{run.pk}/charts.json?names=" in u for u in timeline_urls)
    # Drawn from the merged document: the first round's points, and the newer one.
    page.wait_for_function(
        "() => { const c = document.querySelector('canvas[data-chart=\"throughput\"]')._chart;"
        " return c && c.data.datasets.some(d => d.label === 'total' && d.data.length >= 5); }",
        timeout=5_000,
    )
    totals = page.evaluate(
        "() => document.querySelector('canvas[data-chart=\"throughput\"]')._chart.data.datasets"
        ".find(d => d.label === 'total').data.map(p => p.y)"
    )
    assert totals == sorted(totals) and totals[:4] == [1e6, 2e6, 3e6, 4e6]
    assert not page.js_errors

"""The run page of a sweep whose last step missed its concurrency, in a real browser: the step
table's Achieved and Max columns and its "off target" badge, and the verdict naming the step.
Written to docs/screenshots/run-steps-off-target.png."""

from __future__ import annotations

import pytest

from tests.browser.test_dashboard_browser import SCREENSHOTS, log_in
from tests.support.factories import mock_campaign
from tests.support.runs import drive

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_the_step_table_shows_what_each_step_achieved(page, live_server, viewer):
    # Sweep 1, 2, 4 of 4 files a step over 10 files of 1 s: the step of 4 gets the last 2.
    run = drive(
        mock_campaign("off-target", dst_query="time=1", file_count=10, concurrency_steps=[1, 2, 4], step_files=4)
    )
    log_in(page, live_server, viewer.username)
    page.goto(f"{live_server.url}/campaigns/runs/{run.pk}/")
    headers = page.locator("#step-table thead th").all_inner_texts()
    assert headers[:4] == ["Step", "Concurrency", "Achieved", "Max"]
    assert page.locator("#step-table tbody tr td:nth-child(4)").all_inner_texts() == ["1", "2", "2"]
    badges = page.locator("#step-table tbody tr").filter(has=page.locator("text=off target"))
    assert badges.count() == 1 and badges.locator("td").first.inner_text() == "2"
    assert "Off target: ×4 ran at" in page.inner_text("#verdict .verdict-headline")
    # The throughput chart draws each step at the concurrency it achieved, its target kept for
    # the axis's ticks and the tooltip: the step of 4 sits at its mean in flight, not at 4.
    canvas = '[data-chart="steps"]'
    page.wait_for_function(f"() => document.querySelector('{canvas}')._chart !== undefined")
    drawn = page.evaluate(f"() => document.querySelector('{canvas}')._chart.data.datasets[0].data")
    steps = {s["concurrency"]: s for s in run.summary["steps"]}
    assert [(p["target"], p["x"]) for p in drawn] == [(c, steps[c]["achieved_mean"]) for c in (1, 2, 4)], drawn
    assert drawn[-1]["x"] < 4
    ticks = page.evaluate(f"() => document.querySelector('{canvas}')._chart.scales.x.ticks.map(t => t.value)")
    assert ticks == [1, 2, 4], ticks
    tooltip = page.evaluate(
        f"""() => {{ const chart = document.querySelector('{canvas}')._chart;
        return chart.options.plugins.tooltip.callbacks.afterLabel({{ raw: chart.data.datasets[0].data[2] }}); }}"""
    )
    assert tooltip == f"target ×4, ran at {steps[4]['achieved_mean']:.2f} in flight", tooltip
    assert page.js_errors == []
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.locator("#verdict").screenshot(path=str(SCREENSHOTS / "verdict-off-target.png"))
    page.locator("#step-table").screenshot(path=str(SCREENSHOTS / "run-steps-off-target.png"))

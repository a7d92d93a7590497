"""A matrix sweep in a real browser: the edit form takes the sweep one axis a line (a bad line
refused at its field), the run steps through every point, and the run page charts the matrix
both ways (throughput against concurrency, a line per TCP buffer; against the TCP buffer, a line
per concurrency) from the steps' own points. The two charts are written to docs/screenshots/."""

from __future__ import annotations

import re

import pytest

from campaigns import runs
from campaigns.models import RunStep
from campaigns.results import concurrency
from campaigns.runs.lifecycle import RunDriver
from tests.browser.test_dashboard_browser import SCREENSHOTS, log_in
from tests.support.factories import mock_campaign

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def datasets(page, chart: str) -> list[dict]:
    """The labels and points of a drawn chart, read from Chart.js itself."""
    page.wait_for_function(f"() => document.querySelector('[data-chart=\"{chart}\"]')._chart !== undefined")
    return page.evaluate(
        f"() => document.querySelector('[data-chart=\"{chart}\"]')._chart.data.datasets"
        ".map(d => ({label: d.label, xs: d.data.map(p => p.x)}))"
    )


def test_a_matrix_sweep_set_in_the_form_is_charted_both_ways(page, live_server, admin_user):
    campaign = mock_campaign("browser-matrix", dst_query="time=1", file_count=8, file_size=4_000_000,
                             checksum_mode="none", concurrency_steps=[1, 2], step_files=2)  # fmt: skip
    log_in(page, live_server, admin_user.username)
    page.goto(f"{live_server.url}/campaigns/{campaign.pk}/edit/")
    page.fill("#id_sweep", "tcp_buffer_size: 0, 4 MB\nparallelism: 2")
    page.click("text=Save campaign")
    said = page.locator("#row-sweep .errorlist").inner_text()
    assert "the axis one of file_size, tpc_mode, tcp_buffer_size, streams" in said
    page.fill("#id_sweep", "tcp_buffer_size: 0, 4 MB")
    page.click("text=Save campaign")
    page.wait_for_url(re.compile(rf".*/campaigns/{campaign.pk}/$"))
    campaign.refresh_from_db()
    assert campaign.sweep == {"tcp_buffer_size": [0, 4_000_000]}
    assert "tcp_buffer_size 0, 4000000, each at every concurrency" in page.inner_text("[data-sweep]")

    run = runs.create_run(campaign, trigger="command")
    RunDriver(run.pk).drive()
    run.refresh_from_db()
    assert (run.state, run.files_done) == ("succeeded", 8), run.stop_reason
    points = list(RunStep.objects.filter(run=run).order_by("index").values_list("point", flat=True))
    assert [(p["tcp_buffer_size"], p["concurrency"]) for p in points] == [
        (0, 1),
        (0, 2),
        (4_000_000, 1),
        (4_000_000, 2),
    ]

    page.goto(f"{live_server.url}/campaigns/runs/{run.pk}/")
    # Each step sits at the copies it really had in flight (its achieved mean, as the run's
    # summary records it), not at its target.
    run.refresh_from_db()
    at = [concurrency.x(step) for step in sorted(run.summary["steps"], key=lambda step: step["step"])]
    assert datasets(page, "steps") == [
        {"label": "TCP buffer 0 B", "xs": at[:2]}, {"label": "TCP buffer 4 MB", "xs": at[2:]}]  # fmt: skip
    assert datasets(page, "steps-by-axis") == [
        {"label": "concurrency 1", "xs": [0, 4_000_000]}, {"label": "concurrency 2", "xs": [0, 4_000_000]}]  # fmt: skip
    headers = page.locator("#step-table thead th").all_inner_texts()
    assert headers[:3] == ["Step", "Concurrency", "TCP buffer"]
    assert page.locator("#step-table tbody tr td:nth-child(3)").all_inner_texts() == ["0 B", "0 B", "4 MB", "4 MB"]
    assert page.js_errors == []
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.locator("#sweep-matrix").scroll_into_view_if_needed()
    page.locator("[data-chart=steps]").locator("xpath=ancestor::figure").screenshot(
        path=str(SCREENSHOTS / "sweep-by-concurrency.png")
    )
    page.locator("#sweep-matrix").screenshot(path=str(SCREENSHOTS / "sweep-by-tcp-buffer.png"))


def test_a_comparison_charts_the_steps_against_streams(page, live_server, viewer):
    """Runs of two campaigns that differ in streams, compared against streams in a real browser:
    one line per concurrency across the runs, the x axis the streams. Written to
    docs/screenshots/compare-by-streams.png."""
    made = []
    for streams in (1, 4):
        run = runs.create_run(
            mock_campaign(f"cmp-streams-{streams}", dst_query="time=0", file_count=9, concurrency_steps=[1, 2, 3],
                          step_files=3, streams=streams),
            trigger="command",
        )  # fmt: skip
        RunDriver(run.pk).drive()
        made.append(run)
    log_in(page, live_server, viewer.username)
    page.goto(f"{live_server.url}/campaigns/compare/?runs={made[0].pk},{made[1].pk}&x=streams")
    assert page.inner_text(".charts h2 >> nth=0") == "Throughput vs streams"
    assert datasets(page, "compare-steps") == [{"label": f"concurrency {c}", "xs": [1, 4]} for c in (1, 2, 3)]
    assert page.js_errors == []
    page.locator("[data-chart=compare-steps]").locator("xpath=ancestor::figure").screenshot(
        path=str(SCREENSHOTS / "compare-by-streams.png")
    )

"""The verdict in the API (run detail, the verdict action, the comparison) and on the run page."""

from __future__ import annotations

import pytest
from django.template.loader import render_to_string
from django.test import Client
from django.utils.html import escape
from rest_framework.test import APIClient

from campaigns import runs
from campaigns.models import Run
from campaigns.runs.lifecycle import RunDriver
from tests.api.test_runs_api import api
from tests.support.factories import mock_campaign

pytestmark = pytest.mark.django_db(transaction=True)


def sweep(name: str, **fields) -> Run:
    # Each mock copy takes 1 s: a step's aggregate grows with its concurrency.
    obj = mock_campaign(name, dst_query="time=1", concurrency_steps=[1, 2, 4], step_files=4, file_count=12, **fields)
    run = runs.create_run(obj, trigger="api")
    RunDriver(run.pk).drive()
    run.refresh_from_db()
    return run


def test_run_detail_and_verdict_action_and_comparison(viewer, settings):
    settings.STORAGEOPS_TARGET_RATE_BPS = 8_000_000_000
    run = sweep("verdict-api", file_size=10_000_000)
    client = api(viewer, "viewer")
    detail = client.get(f"/api/v1/runs/{run.pk}/").json()
    verdict = detail["verdict"]
    assert verdict == run.summary["verdict"]
    # The curve of a mock run is whatever the mock plugin's timing makes it; the figures
    # themselves are tested in tests/campaigns/test_verdicts.py. Here: it is there, and whole.
    assert verdict["status"] in ("levelled", "still_rising")
    assert verdict["knee"]["concurrency"] in (1, 2, 4) and verdict["peak"]["throughput_bps"] > 0
    assert f"concurrency {verdict['knee']['concurrency']}" in verdict["headline"]
    assert [s["concurrency"] for s in verdict["saturation"]] == [1, 2, 4]
    # No host of the endpoints has a collector: the verdict says saturation is unknown.
    assert "Saturation unknown" in verdict["headline"]
    assert verdict["capacity"]["doors_needed"] >= 1 and verdict["capacity"]["target_rate_bits"] == 8_000_000_000

    fresh = client.get(f"/api/v1/runs/{run.pk}/verdict/")
    assert fresh.status_code == 200
    assert {k: fresh.json()[k] for k in ("status", "knee", "peak")} == {
        k: verdict[k] for k in ("status", "knee", "peak")
    }
    assert client.get(f"/api/v1/runs/{run.pk + 1000}/verdict/").status_code == 404

    rows = client.get(f"/api/v1/compare/?runs={run.pk}").json()["runs"]
    assert rows[0]["verdict"]["headline"] == verdict["headline"] and rows[0]["verdict"]["knee"] == verdict["knee"]

    assert APIClient().get(f"/api/v1/runs/{run.pk}/verdict/").status_code in (401, 403)


def test_the_run_page_shows_the_verdict(viewer):
    run = sweep("verdict-page", file_size=10_000_000)
    web = Client()
    web.force_login(viewer)
    page = web.get(run.get_absolute_url()).content.decode()
    assert 'id="verdict"' in page and "Saturation per step" in page
    assert escape(run.summary["verdict"]["headline"]) in page
    assert "Assumptions of the capacity projection" in page


def test_the_partial_renders_a_comparison_rows_short_verdict():
    # What the comparison page will include for each run: the short form from compare().
    short = {
        "status": "levelled",
        "headline": "Knee at concurrency 4 (300 MB/s; peak 310 MB/s at 16). Bottleneck: CPU of xrootd on door-a.",
        "knee": {"step": 2, "concurrency": 4, "throughput_bps": 300e6},
        "bottleneck": {"title": "CPU of xrootd on door-a", "door": "door-a", "resource": "daemon_cpu",
                       "label": "xrootd", "value": 0.97},
        "doors_needed": 8,
        "knee_text": "concurrency 4 — 300 MB/s",
        "cause": "Bottleneck: CPU of xrootd on door-a at 97 % (97 % of 1 core(s)) from concurrency 4.",
    }  # fmt: skip
    html = render_to_string("campaigns/partials/verdict.html", {"verdict": short})
    assert "levelled off" in html
    # The row labelled Bottleneck gives the sentence without the word again.
    row = "CPU of xrootd on door-a at 97 % (97 % of 1 core(s)) from concurrency 4."
    assert f'<dd data-verdict-row="bottleneck">{row}</dd>' in html
    assert '<dd data-verdict-row="knee">concurrency 4 — 300 MB/s</dd>' in html
    assert "Doors needed</dt><dd>8" in html and "Saturation per step" not in html
    assert "No verdict yet" in render_to_string("campaigns/partials/verdict.html", {"verdict": None})

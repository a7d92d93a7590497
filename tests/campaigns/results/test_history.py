"""The campaign history chart's data: each ended run's figure beside the band stored with its
judgement, partial and disturbed runs shown as what they were, the changes of the doors on it."""

from __future__ import annotations

import html
import json
from datetime import timedelta

import pytest
from django.utils import timezone

from campaigns.results import baselines
from campaigns.results.history import campaign_history
from collectors.events import log_event
from tests.campaigns.results.test_baselines import MB, finished
from tests.support.factories import mock_campaign

pytestmark = pytest.mark.django_db


def judged(run):
    run.summary["judgement"] = baselines.judge(run, summary=run.summary)
    run.save()
    return run


def test_each_run_is_drawn_with_the_band_it_was_judged_against_and_the_changes_between():
    campaign = mock_campaign("charted", file_count=100, concurrency_steps=[4])
    now = timezone.now()
    runs = [
        judged(finished(campaign, now - timedelta(hours=6 - i), (100 + d) * MB)) for i, d in enumerate([0, 2, -1, 1])
    ]
    lost = judged(finished(campaign, now - timedelta(hours=1, minutes=30), 60 * MB, state="partial"))
    change = log_event("config_change", "xrootd.chksum max 2", endpoint=campaign.destinations.first(),
                       time=now - timedelta(minutes=50))  # fmt: skip
    log_event("note", "not a change: drawn on run pages, not here", endpoint=campaign.destinations.first())
    slow = judged(finished(campaign, now, 70 * MB))
    # A band drawn is the one each run was told; a later run changing the history changes nothing.
    data = campaign_history(campaign)
    points = data["points"]
    assert [p["run"] for p in points] == [*(r.pk for r in runs), lost.pk, slow.pk]
    assert [p["y"] for p in points] == [100 * MB, 102 * MB, 99 * MB, 101 * MB, 60 * MB, 70 * MB]
    assert [p["low"] is None for p in points] == [True, True, True, False, False, False]
    fourth = next(f for f in runs[3].summary["judgement"]["figures"] if f["key"] == "throughput")
    assert (points[3]["low"], points[3]["high"]) == (fourth["low"], fourth["high"])
    # The partial run is shown, marked, and made no baseline: the slow run's band is of four.
    assert points[4]["state"] == "partial" and slow.summary["judgement"]["baseline_runs"] == [r.pk for r in runs[::-1]]
    assert points[5]["figure_status"] == "regressed" and points[5]["judgement"] == "regressed"
    assert points[5]["url"] == f"/campaigns/runs/{slow.pk}/"
    assert [(e["kind"], e["summary"]) for e in data["events"]] == [(change.kind, change.summary)]
    assert data["events"][0]["time"] == change.time.timestamp() * 1000
    # Every figure the runs have can be charted, the step throughputs after the fixed ones.
    keys = [f["key"] for f in data["figures"]]
    assert keys[:2] == ["throughput", "duration_p95"] and keys[-1] == "step_throughput_4"
    p95 = campaign_history(campaign, "duration_p95")
    assert p95["unit"] == "s" and len(p95["points"]) == 6


def test_the_page_offers_the_chart_and_its_data_refuses_a_bad_figure(client, viewer):
    campaign = mock_campaign("offered", file_count=100, concurrency_steps=[4])
    judged(finished(campaign, timezone.now(), 100 * MB))
    client.force_login(viewer)
    page = client.get(campaign.get_absolute_url()).content.decode()
    sources = html.escape(json.dumps({"history": f"/campaigns/{campaign.pk}/history.json"}))
    assert f'data-chart="history" data-draw="history" data-sources="{sources}"' in page and "js/charts" in page
    ok = client.get(f"/campaigns/{campaign.pk}/history.json?figure=step_throughput_4")
    assert ok.status_code == 200 and len(ok.json()["points"]) == 1
    bad = client.get(f"/campaigns/{campaign.pk}/history.json?figure=../../etc")
    assert bad.status_code == 400 and "figure" in bad.json()["error"]
    assert client.get("/campaigns/999999/history.json").status_code == 404

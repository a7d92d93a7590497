"""The host page over an explicit window: what a verdict's evidence links to."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from collectors.models import Host, MetricSample
from collectors.windows import MIN_MARGIN, chosen_window

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
STEP_FROM = datetime(2026, 11, 24, 0, 8, 12, tzinfo=UTC)
STEP_TO = STEP_FROM + timedelta(seconds=12)


def test_an_explicit_window_is_shown_with_a_margin_and_highlighted():
    window = chosen_window({"from": STEP_FROM.isoformat(), "to": STEP_TO.isoformat()}, NOW)
    assert window.highlight == (STEP_FROM, STEP_TO)
    assert (window.start, window.end) == (STEP_FROM - MIN_MARGIN, STEP_TO + MIN_MARGIN)
    assert window.range == "" and window.note == ""


@pytest.mark.parametrize(
    ("params", "reason"),
    [
        ({"from": "yesterday", "to": STEP_TO.isoformat()}, "ISO 8601"),
        ({"from": "2026-11-24T00:08:12", "to": STEP_TO.isoformat()}, "UTC offset"),  # naive
        ({"from": STEP_TO.isoformat(), "to": STEP_FROM.isoformat()}, "before"),
        ({"from": "2026-01-01T00:00:00+00:00", "to": STEP_TO.isoformat()}, "at most 31 days"),
        ({"from": STEP_FROM.isoformat()}, "both"),
        ({"from": "2026-13-45T99:00:00+00:00", "to": STEP_TO.isoformat()}, "ISO 8601"),
    ],
)
def test_a_bad_window_falls_back_to_the_default_range_and_says_why(params, reason):
    window = chosen_window(params, NOW)
    assert window.highlight is None and window.range == "6h"
    assert (window.start, window.end) == (NOW - timedelta(hours=6), NOW)
    assert reason in window.note


def test_the_host_page_and_its_json_show_the_step_asked_for(client, viewer, db):
    host = Host.objects.create(name="door-w", sample_interval=1)
    start = timezone.now() - timedelta(hours=30)  # outside every fixed range but 7 d
    MetricSample.objects.bulk_create(
        MetricSample(host=host, metric="cpu.percent", label="", time=start + timedelta(seconds=s), value=50 + s)
        for s in range(0, 12, 2)
    )
    client.force_login(viewer)
    query = {"from": start.isoformat(), "to": (start + timedelta(seconds=12)).isoformat()}
    page = client.get(f"/hosts/{host.pk}/", query)
    assert page.status_code == 200
    assert "(shaded)" in page.content.decode()
    body = client.get(f"/hosts/{host.pk}/metrics.json", query).json()
    assert body["highlight"] == [start.timestamp() * 1000, (start + timedelta(seconds=12)).timestamp() * 1000]
    points = body["metrics"]["cpu.percent"]["door-w"]
    # Every sample is in the window, in buckets fine enough to tell the step's seconds apart.
    assert body["bucket_seconds"] <= 2 and [round(v) for _, v in points] == [50, 52, 54, 56, 58, 60]
    # The default range would have shown none of those samples.
    assert not client.get(f"/hosts/{host.pk}/metrics.json?range=24h").json()["metrics"].get("cpu.percent")
    bad = client.get(f"/hosts/{host.pk}/", {"from": "soon", "to": "later"})
    assert bad.status_code == 200 and "The window asked for is not shown" in bad.content.decode()


def test_a_verdicts_evidence_links_to_the_host_over_its_step(db):
    from django.template.loader import render_to_string

    host = Host.objects.create(name="door-e")
    evidence = {"door": "door-e", "host_id": host.pk, "metrics": ["proc.cpu_percent"], "label": "xrootd",
                "from": STEP_FROM.isoformat(), "to": STEP_TO.isoformat(), "samples": 11}  # fmt: skip
    bottleneck = {"title": "CPU of xrootd on door-e", "value": 0.97, "detail": "", "concurrency": 4,
                  "evidence": evidence}  # fmt: skip
    html = render_to_string("campaigns/partials/verdict.html", {"verdict": {"headline": "h", "bottleneck": bottleneck}})
    assert "11 samples of proc.cpu_percent (xrootd) on door-e, 00:08:12–00:08:24 UTC" in html
    link = f"/hosts/{host.pk}/?from=2026-11-24T00%3A08%3A12%2B00%3A00&amp;to=2026-11-24T00%3A08%3A24%2B00%3A00#charts"
    assert link in html, html


def test_a_host_younger_than_the_range_is_drawn_from_its_registration(client, viewer, db):
    host = Host.objects.create(name="door-new")
    client.force_login(viewer)
    body = client.get(f"/hosts/{host.pk}/metrics.json?range=6h").json()
    now_ms = timezone.now().timestamp() * 1000
    # From a minute before it was registered (at least five minutes of chart), not six hours back.
    assert now_ms - body["start"] <= 6 * 60 * 1000
    Host.objects.filter(pk=host.pk).update(created=timezone.now() - timedelta(days=3))
    body = client.get(f"/hosts/{host.pk}/metrics.json?range=6h").json()
    assert now_ms - body["start"] == pytest.approx(6 * 3600 * 1000, abs=60_000)

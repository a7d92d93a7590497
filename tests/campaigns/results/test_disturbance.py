"""Runs with a restart or a config change inside their window are flagged, the report lists
those events, and the trimmed figures leave out the minutes around them."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from campaigns.models import Run, Transfer
from campaigns.results import analysis, disturbance
from campaigns.results.finalize import compute_summary
from collectors.events import log_event
from collectors.models import Host
from storageops import units
from tests.support.factories import mock_campaign
from tests.support.runs import drive

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 1, 10, 0, 0, tzinfo=UTC)


@pytest.fixture
def run():
    campaign = mock_campaign("disturbed")
    door = Host.objects.create(name="door2", address="127.0.0.1")
    dst = campaign.destinations.first()
    dst.hosts.set([door])
    from campaigns.runs.planning import campaign_snapshot

    run = Run.objects.create(
        campaign=campaign, snapshot=campaign_snapshot(campaign), state="succeeded",
        started_at=T0, finished_at=T0 + timedelta(minutes=20),
    )  # fmt: skip
    src = campaign.sources.first()
    # One 100 MB copy a minute, each lasting 30 s, from minute 0 to minute 19.
    for i in range(20):
        start = T0 + timedelta(minutes=i)
        Transfer.objects.create(
            run=run, index=i, step=0, source=f"mock://s/{i}", destination=f"mock://d/{i}", source_endpoint=src,
            destination_endpoint=dst, size=100_000_000, state="succeeded", attempt=1, started_at=start,
            finished_at=start + timedelta(seconds=30), duration=30.0, bytes_transferred=100_000_000,
        )  # fmt: skip
    return run


def test_a_restart_of_a_door_inside_the_window_disturbs_the_run(run):
    door = Host.objects.get(name="door2")
    restart = log_event("service_restart", "xrootd restarted on door2", source="collector", host=door,
                        time=T0 + timedelta(minutes=10, seconds=15))  # fmt: skip
    run.refresh_from_db()
    assert run.disturbed
    report = disturbance.disturbance_report(run, margin=timedelta(minutes=2))
    assert [e["id"] for e in report["events"]] == [restart.pk]
    # Independently: the window [10:15 - 2 min, 10:15 + 2 min] = [8:15, 12:15] touches the
    # copies that start at minutes 8, 9, 10, 11 and 12 (each runs 30 s): 15 copies remain, and
    # the active time is 19.5 min minus the 4 excluded minutes.
    kept_bytes = 15 * 100_000_000
    active_seconds = (19 * 60 + 30) - 4 * 60
    total = report["trimmed"]["total"]
    assert total["files_ok"] == 15
    assert total["throughput_bps"] == pytest.approx(kept_bytes / active_seconds)
    left_out = report["trimmed"]["left_out"]
    assert left_out["transfers"] == 5 and left_out["bytes"] == 5 * 100_000_000 and left_out["seconds"] == 240
    untrimmed = analysis.run_summary(run)["total"]
    assert untrimmed["throughput_bps"] == pytest.approx(20 * 100_000_000 / (19 * 60 + 30))


def test_events_elsewhere_or_outside_the_window_or_mere_notes_do_not_disturb(run):
    other = Host.objects.create(name="door7")
    log_event("service_restart", "restart of an unrelated door", host=other, time=T0 + timedelta(minutes=5))
    log_event("service_restart", "restart after the run", host=Host.objects.get(name="door2"),
              time=T0 + timedelta(minutes=30))  # fmt: skip
    log_event("note", "looked at the dashboard", time=T0 + timedelta(minutes=5))
    run.refresh_from_db()
    assert not run.disturbed


def test_backend_and_site_wide_events_apply_too(run):
    log_event("deploy", "dCache 9.2.22 deployed", backend=run.campaign.destinations.first().backend,
              source="api", time=T0 + timedelta(minutes=3))  # fmt: skip
    run.refresh_from_db()
    assert run.disturbed
    assert len(disturbance.disturbance_report(run)["events"]) == 1


def stored_with_disturbance(run: Run) -> Run:
    """The run's results as finalize would have written them had the event been logged while it ran."""
    Run.objects.filter(pk=run.pk).update(summary=compute_summary(run, timezone.now()))
    run.refresh_from_db()
    return run


def banner(client, run: Run, url: str | None = None) -> str:
    """The banner's text on the run page, or on another page of it (its report)."""
    page = client.get(url or run.get_absolute_url()).content.decode()
    note = page[page.index('id="disturbed-note"') : page.index("</div>", page.index('id="disturbed-note"'))]
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", note))


def test_the_banner_says_what_was_left_out_and_what_remains(run, client, viewer, settings):
    settings.STORAGEOPS_DISTURBANCE_MARGIN_SECONDS = 120
    log_event("service_restart", "xrootd restarted on door2", host=Host.objects.get(name="door2"),
              time=T0 + timedelta(minutes=10, seconds=15))  # fmt: skip
    run = stored_with_disturbance(Run.objects.get(pk=run.pk))
    note = disturbance.left_out_note(run, run.summary)
    # As in the test above: the copies of minutes 8 to 12 overlap [8:15, 12:15] and are left
    # out with those 4 minutes; 15 copies remain, over 19.5 min less the 4 left out.
    remaining_seconds = (19 * 60 + 30) - 4 * 60
    assert note["left_out"] == {"transfers": 5, "bytes": 5 * 100_000_000, "seconds": 240.0}
    assert note["remains"] == {
        "transfers": 15,
        "bytes": 15 * 100_000_000,
        "seconds": remaining_seconds,
        "throughput_bps": pytest.approx(15 * 100_000_000 / remaining_seconds),
        "success_rate": 1.0,
    }
    assert note["covers_run"] is False

    client.force_login(viewer)
    text = banner(client, run)
    assert (
        f"Left out ±2 min 00 s around 1 event: 5 copies, {units.human_bytes(5e8)} and 4 min 00 s of the run."
    ) in text, text
    assert (
        f"What remains: 15 copies, {units.human_bytes(1.5e9)} over {units.human_duration(remaining_seconds)}: "
        f"{units.human_rate(1.5e9 / remaining_seconds)}, success 100.0 %."
    ) in text, text
    assert "–" not in text and "Nothing remains" not in text
    # The report says the same, from the same partial.
    assert banner(client, run, f"/api/v1/runs/{run.pk}/report.html") == text


@pytest.mark.django_db(transaction=True)
def test_a_short_run_inside_the_window_leaves_nothing_and_says_so(client, viewer, settings):
    """The tracker's case: a short real run, one restart in it, and a margin longer than the run."""
    settings.STORAGEOPS_DISTURBANCE_MARGIN_SECONDS = 120
    run = drive(mock_campaign("short-disturbed", dst_query="time=1", file_count=3, concurrency_steps=[1]))
    middle = run.started_at + (run.finished_at - run.started_at) / 2
    log_event("service_restart", "dCache restarted", backend=run.campaign.destinations.first().backend, time=middle)
    run = stored_with_disturbance(Run.objects.get(pk=run.pk))
    assert run.disturbed
    rows = list(Transfer.objects.filter(run=run).values_list("state", "bytes_transferred"))
    assert len(rows) == 3 and {state for state, _ in rows} == {"succeeded"}
    run_seconds = round((run.finished_at - run.started_at).total_seconds(), 3)
    note = disturbance.left_out_note(run, run.summary)
    # The left-out time is the run's own, not the ±2 min the windows span.
    assert note["left_out"] == {"transfers": 3, "bytes": sum(b for _, b in rows), "seconds": run_seconds}
    assert note["remains"] is None and note["covers_run"] is True

    client.force_login(viewer)
    text = banner(client, run)
    assert (
        f"Left out ±2 min 00 s around 1 event: 3 copies, {units.human_bytes(sum(b for _, b in rows))} and "
        f"{units.human_duration(run_seconds)} of the run (all of it)."
    ) in text, text
    assert "Nothing remains: the window around the event covers the whole run." in text, text
    assert "–" not in text
    assert banner(client, run, f"/api/v1/runs/{run.pk}/report.html") == text

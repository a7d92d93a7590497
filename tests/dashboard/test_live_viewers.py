"""Hundreds of viewers of one live run (issue 46): each view computed once a moment for all of
them, in every process; 304 for what a viewer has; the timeline from a viewer's last point on;
and none of it for a user without a role."""

from __future__ import annotations

import threading
import time

import pytest
from django.test import Client

from campaigns import runs
from campaigns.models import Run
from campaigns.results import timeline_since
from campaigns.web import chart_registry, live_snapshot
from tests.support.factories import mock_campaign

pytestmark = pytest.mark.django_db(transaction=True)

DOC = {
    "bucket_seconds": 30,
    "times": [15_000.0, 45_000.0, 75_000.0, 105_000.0],
    "doors": {"a": [1.0, 2.0, 3.0, 4.0]},
    "total": [1.0, 2.0, 3.0, 4.0],
    "rolling": [1.0, 1.5, 2.0, 2.5],
    "rolling_buckets": 5,
    "active": [5.0, 6.0, 7.0, 8.0],
    "failures": [0, 0, 1, 0],
}


@pytest.fixture
def live_run() -> Run:
    run = runs.create_run(mock_campaign("viewers"), trigger="command")
    Run.objects.filter(pk=run.pk).update(state="running", files_done=3)
    live_snapshot.forget_process_memory()
    return run


@pytest.fixture
def counted_timeline(monkeypatch):
    """The timeline document replaced by DOC, each computation counted."""
    computed: list[int] = []

    def timeline(run):
        computed.append(run.pk)
        time.sleep(0.05)  # long enough for the other viewers to arrive meanwhile
        return dict(DOC)

    monkeypatch.setitem(chart_registry.RUN_DOCUMENTS, "timeline", timeline)
    return computed


def test_one_computation_for_many_concurrent_viewers_of_a_moment():
    """Forty viewers at the turn of a second, in threads (as a web process's are): one computes,
    the others wait for its result."""
    computed: list[int] = []
    start = threading.Barrier(40)
    got: list[int] = []
    key = f"test:{time.time_ns()}"

    def compute() -> int:
        computed.append(1)
        time.sleep(0.2)
        return 42

    def viewer() -> None:
        start.wait()
        got.append(live_snapshot.once(key, 1, compute))

    threads = [threading.Thread(target=viewer) for _ in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == [42] * 40
    assert len(computed) == 1


def test_while_one_viewer_computes_the_next_moment_the_others_get_the_previous_one():
    """The web threads are not all held on one computation at each turn of the second."""
    key = f"test:{time.time_ns()}"
    assert live_snapshot.once(key, 1, lambda: "one") == "one"
    live_snapshot.forget_process_memory()
    computing, release = threading.Event(), threading.Event()
    computed: list[int] = []

    def slow() -> str:
        computed.append(1)
        computing.set()
        release.wait(5)
        return "two"

    first = threading.Thread(target=lambda: live_snapshot.once(key, 2, slow))
    first.start()
    computing.wait(5)
    others = [live_snapshot.once(key, 2, slow) for _ in range(10)]
    release.set()
    first.join()
    assert others == ["one"] * 10 and len(computed) == 1
    live_snapshot.forget_process_memory()
    assert live_snapshot.once(key, 2, slow) == "two" and len(computed) == 1


def test_chart_documents_are_computed_once_a_second_for_viewers_in_every_process(
    live_run, counted_timeline, viewer, operator, monkeypatch
):
    """Viewers answered by other web processes (each with its memory emptied) get the computation
    made for the first; the next second computes again."""
    monkeypatch.setattr(live_snapshot.time, "time", lambda: 1_900_000_000.0)
    url = f"/campaigns/runs/{live_run.pk}/charts/timeline.json"
    bodies = []
    for user in (viewer, operator, viewer, operator, viewer):
        live_snapshot.forget_process_memory()  # another process
        client = Client()
        client.force_login(user)
        response = client.get(url)
        assert response.status_code == 200
        bodies.append(response.json())
    assert counted_timeline == [live_run.pk]
    assert all(body == bodies[0] for body in bodies) and bodies[0]["live"] is True
    monkeypatch.setattr(live_snapshot.time, "time", lambda: 1_900_000_001.0)
    client.get(url)
    assert len(counted_timeline) == 2


@pytest.mark.parametrize("part", ["progress/", "charts/timeline.json", "charts.json", "transfers/"])
def test_etag_round_trip_answers_304_for_what_the_viewer_has(live_run, counted_timeline, client, viewer, part):
    client.force_login(viewer)
    url = f"/campaigns/runs/{live_run.pk}/{part}"
    first = client.get(url)
    assert first.status_code == 200 and first["ETag"].startswith('"')
    assert "private" in first["Cache-Control"] and "no-cache" in first["Cache-Control"]
    again = client.get(url, headers={"If-None-Match": first["ETag"]})
    assert again.status_code == 304 and again.content == b"" and again["ETag"] == first["ETag"]
    # Another tag (what the viewer held before a change): the whole body again.
    other = client.get(url, headers={"If-None-Match": '"not-this-one"'})
    assert other.status_code == 200 and other.content == first.content


def test_progress_tag_changes_with_the_run(live_run, client, viewer, monkeypatch):
    monkeypatch.setattr("campaigns.web.shared_partials.time.time", lambda: 1_900_000_000.0)
    client.force_login(viewer)
    url = f"/campaigns/runs/{live_run.pk}/progress/"
    tag = client.get(url)["ETag"]
    Run.objects.filter(pk=live_run.pk).update(files_done=4)
    changed = client.get(url, headers={"If-None-Match": tag})
    assert changed.status_code == 200 and "4 ok" in changed.content.decode()


@pytest.mark.parametrize("part", ["progress/", "charts/timeline.json", "charts.json", "transfers/"])
def test_a_user_without_a_role_gets_no_shared_content(live_run, counted_timeline, client, viewer, outsider, part):
    """The shared body and its tag exist (a viewer asked); a signed-in user without a role, even
    naming the tag, and an anonymous visitor, get neither the body nor a 304."""
    url = f"/campaigns/runs/{live_run.pk}/{part}"
    client.force_login(viewer)
    shown = client.get(url)
    assert shown.status_code == 200
    nobody, anonymous = Client(), Client()
    nobody.force_login(outsider)
    for who in (nobody, anonymous):
        for headers in ({}, {"If-None-Match": shown["ETag"]}):
            response = who.get(url, headers=headers)
            assert response.status_code in (302, 403), response.status_code
            assert "ETag" not in response
            assert shown.content not in response.content
            assert b"3 ok" not in response.content and b"bucket_seconds" not in response.content


def test_since_sends_only_the_points_from_the_viewers_last_one():
    part = timeline_since.after(DOC, 75_000.0, 30)
    assert part["since"] == 75_000.0
    assert part["times"] == [75_000.0, 105_000.0]  # its last point again (a live bucket still fills), and newer
    assert part["doors"] == {"a": [3.0, 4.0]} and part["total"] == [3.0, 4.0] and part["failures"] == [1, 0]
    assert len(part["rolling"]) == len(part["active"]) == 2
    # Past the last point: nothing new.
    assert timeline_since.after(DOC, 200_000.0, 30)["times"] == []
    # Buckets of another width than the viewer holds: the whole document, unmarked.
    assert timeline_since.after(DOC, 75_000.0, 10) == DOC


def test_since_through_the_view(live_run, counted_timeline, client, viewer, monkeypatch):
    monkeypatch.setattr(live_snapshot.time, "time", lambda: 1_900_000_000.0)  # three asks in one second
    client.force_login(viewer)
    url = f"/campaigns/runs/{live_run.pk}/charts/timeline.json"
    whole = client.get(url).json()
    assert whole["times"] == DOC["times"] and "since" not in whole
    part = client.get(url, {"since": "75000", "bucket": "30"}).json()
    assert part["times"] == [75_000.0, 105_000.0] and part["since"] == 75_000.0 and part["live"] is True
    # A since that is not a number: the whole document.
    assert client.get(url, {"since": "soon"}).json()["times"] == DOC["times"]
    assert counted_timeline == [live_run.pk]  # every answer cut from the one computation


def test_a_missing_run_is_404(client, viewer):
    client.force_login(viewer)
    assert client.get("/campaigns/runs/999999/charts/timeline.json").status_code == 404


def test_the_bundle_is_every_document_of_one_computation_and_cuts_the_timeline(
    live_run, counted_timeline, client, viewer, monkeypatch
):
    """The run page asks its documents in one request: the same documents as one by one, the
    timeline from `since` on, computed once for every viewer and process of the second."""
    monkeypatch.setattr(live_snapshot.time, "time", lambda: 1_900_000_000.0)
    client.force_login(viewer)
    url = f"/campaigns/runs/{live_run.pk}/charts.json"
    whole = client.get(url).json()["docs"]
    assert sorted(whole) == sorted(chart_registry.RUN_DOCUMENTS)
    assert whole["timeline"]["times"] == DOC["times"] and whole["timeline"]["live"] is True
    live_snapshot.forget_process_memory()  # another process
    some = client.get(url, {"names": "timeline,steps,nothing", "since": "75000", "bucket": "30"}).json()["docs"]
    assert sorted(some) == ["steps", "timeline"]
    assert some["timeline"]["times"] == [75_000.0, 105_000.0] and some["timeline"]["since"] == 75_000.0
    assert some["steps"] == whole["steps"]
    assert counted_timeline == [live_run.pk]


def test_the_first_transfers_page_is_shared_and_a_filtered_one_is_not(live_run, client, viewer, monkeypatch):
    from campaigns.web import run_views

    rendered: list[int] = []
    real = run_views._transfers_context
    monkeypatch.setattr(run_views, "_transfers_context", lambda pk, q: rendered.append(pk) or real(pk, q))
    monkeypatch.setattr(live_snapshot.time, "time", lambda: 1_900_000_000.0)
    client.force_login(viewer)
    url = f"/campaigns/runs/{live_run.pk}/transfers/"
    for _ in range(3):
        live_snapshot.forget_process_memory()
        assert client.get(url).status_code == 200
    assert rendered == [live_run.pk]
    assert client.get(url, {"state": "failed"}).status_code == 200
    assert len(rendered) == 2

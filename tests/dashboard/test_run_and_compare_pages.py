"""The run page, its transfers table (the API's filterset), the comparison page with its
trimming, host and event pages, and the query counts of the list pages."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest
from django.utils.html import escape

from campaigns import runs
from campaigns.models import Run, RunChart, Transfer
from campaigns.results import comparison
from campaigns.runs.lifecycle import RunDriver
from collectors.events import log_event
from collectors.models import Event, Host
from tests.support.factories import campaign, endpoint, half_failing_campaign, mock_campaign
from tests.support.runs import drive

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def two_runs() -> list[Run]:
    a = drive(mock_campaign("cmp-a", dst_query="time=0.01", file_count=40, concurrency_steps=[1, 4], step_files=20))
    b = drive(mock_campaign("cmp-b", dst_query="time=0.02", file_count=40, concurrency_steps=[1, 4], step_files=20,
                            streams=2))  # fmt: skip
    return [a, b]


def test_run_page_and_transfers_table(client, viewer, two_runs):
    run = two_runs[0]
    client.force_login(viewer)
    page = client.get(f"/campaigns/runs/{run.pk}/")
    html = page.content.decode()
    assert page.status_code == 200
    assert 'data-chart="throughput"' in html and 'id="step-table"' in html
    assert f"/api/v1/runs/{run.pk}/export/?as=csv" in html
    # An ended run's progress block carries no polling trigger.
    progress = client.get(f"/campaigns/runs/{run.pk}/progress/", headers={"HX-Request": "true"})
    assert "hx-trigger" not in progress.content.decode() and progress["HX-Refresh"] == "true"
    table = client.get(f"/campaigns/runs/{run.pk}/transfers/").content.decode()
    assert table.count("<tr>") == 1 + 40  # header + 40 rows, under one page
    failed_only = client.get(f"/campaigns/runs/{run.pk}/transfers/?state=failed").content.decode()
    assert "No transfer matches" in failed_only
    step1 = client.get(f"/campaigns/runs/{run.pk}/transfers/?step=1&after=25").content.decode()
    assert step1.count("<tr>") == 1 + 14  # indexes 26..39
    bad = client.get(f"/campaigns/runs/{run.pk}/transfers/?state=exploded")
    assert "Select a valid choice" in bad.content.decode()


def test_download_links_work_with_the_browser_session(client, viewer, two_runs):
    run = two_runs[0]
    client.force_login(viewer)
    html = client.get(f"/campaigns/runs/{run.pk}/").content.decode()
    for link, kind in ((f"/api/v1/runs/{run.pk}/export/?as=csv", "text/csv"),
                       (f"/api/v1/runs/{run.pk}/export/?as=json", "application/json"),
                       (f"/api/v1/runs/{run.pk}/steps-csv/", "text/csv")):  # fmt: skip
        assert link in html
        response = client.get(link)
        assert response.status_code == 200 and response["Content-Type"].startswith(kind), link
        body = b"".join(response.streaming_content).decode()
        assert body.count("\n") >= (3 if "steps" in link else 41), link


def test_transfer_pages_are_keyset_paged(client, viewer):
    run = drive(mock_campaign("paged", file_count=120, concurrency_steps=[8]))
    client.force_login(viewer)
    first = client.get(f"/campaigns/runs/{run.pk}/transfers/")
    assert first.context["next_after"] == 49
    second = client.get(f"/campaigns/runs/{run.pk}/transfers/?after=49")
    assert [t.index for t in second.context["rows"]][:2] == [50, 51]


def test_comparison_page_reads_like_the_bnl_table(client, viewer, two_runs):
    a, b = two_runs
    client.force_login(viewer)
    response = client.get(f"/campaigns/compare/?runs={a.pk}&runs={b.pk}")
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="compare-table"' in html and "Aggregate throughput" in html and "Peak step" in html
    result = response.context["result"]
    assert [r["run"] for r in result["runs"]] == [a.pk, b.pk]
    assert "streams" in result["differing_parameters"]
    assert any(p["name"] == "streams" and p["differs"] for p in result["parameter_table"])
    data = client.get(f"/campaigns/compare/data.json?runs={a.pk},{b.pk}").json()
    assert [len(r["steps"]) for r in data["runs"]] == [2, 2]
    assert all(r["over_time"] for r in data["runs"])


def test_a_comparison_names_the_backends_by_direction_and_sees_swapped_endpoints(client, viewer):
    dcache = endpoint("door-dcache", "mock://dcache.test/data/?time=0", backend_name="dcache-disk")
    eos = endpoint("door-eos", "mock://eos.test/data/?time=0", backend_name="eos-zfs")
    into_eos = drive(campaign("into-eos", [dcache], [eos], file_count=4))
    into_dcache = drive(campaign("into-dcache", [eos], [dcache], file_count=4))
    result = comparison.compare([into_eos, into_dcache])
    assert [(r["backends_written"], r["backends_read"]) for r in result["runs"]] == [
        (["eos-zfs"], ["dcache-disk"]),
        (["dcache-disk"], ["eos-zfs"]),
    ]
    # Everything else is the same; the direction is what differs, and the table says so.
    assert {"sources", "destinations"} <= set(result["differing_parameters"])
    assert [r["parameters"]["destinations"] for r in result["runs"]] == [["door-eos"], ["door-dcache"]]
    client.force_login(viewer)
    html = client.get(f"/campaigns/compare/?runs={into_eos.pk}&runs={into_dcache.pk}").content.decode()
    assert "Backend written (destination)" in html and "Backend read (source)" in html


def test_comparison_and_home_show_each_runs_verdict(client, viewer, two_runs):
    """The verdict stored when each sweep finished is the line a person reads on both pages."""
    client.force_login(viewer)
    compare_html = client.get(f"/campaigns/compare/?runs={two_runs[0].pk}&runs={two_runs[1].pk}").content.decode()
    home_html = client.get("/").content.decode()
    for run in two_runs:
        run.refresh_from_db()
        verdict = run.summary["verdict"]
        assert verdict["headline"]
        assert escape(verdict["headline"]) in compare_html
        assert escape(verdict["headline"]) in home_html
        knee = verdict["knee"]
        # Mock copies of no duration rarely fill their slots: a sweep all off target has no knee.
        if verdict["status"] == "inconclusive":
            assert knee is None and verdict["headline"].startswith("Inconclusive")
        else:
            assert f"×{knee['concurrency']}" in compare_html
    assert "Per step: p95 latency, failed" in compare_html


@pytest.mark.parametrize(
    ("query", "message"),
    [("runs=1", "Pick 2 to 8"), ("runs=a,b", "separated by commas"), ("runs=999998,999999", "No run with id"),
     ("runs=1,2&warmup=-5", "greater than or equal to 0"), ("warmup=5", "Pick 2 to 8 runs, or a campaign")],
)  # fmt: skip
def test_comparison_refuses_bad_selections(client, viewer, query, message):
    client.force_login(viewer)
    response = client.get(f"/campaigns/compare/?{query}")
    assert response.status_code == 400
    assert message in response.content.decode()


def _kept_by_rows(run: Run, keep) -> dict:
    """The trimmed figures the documented way, row by row: the copies that ended in a kept
    second, and each successful copy's bytes spread over its duration, counted in kept seconds."""
    ok = moved = 0.0
    for state, size, started, finished in Transfer.objects.filter(run=run).values_list(
        "state", "bytes_transferred", "started_at", "finished_at"
    ):
        s, e = started.timestamp(), finished.timestamp()
        if state == "succeeded" and keep(math.floor(e)):
            ok += 1
        if state == "succeeded":
            seconds = range(math.floor(s), math.floor(e) + 1)
            moved += sum(size * (min(e, k + 1) - max(s, k)) / (e - s) for k in seconds if keep(k))
    return {"files_ok": ok, "bytes": moved}


def test_trimming_cuts_whole_seconds_from_the_buckets():
    # Copies of 1 s (the mock plugin's time is whole seconds), two and then four at a time: a
    # run of about 6 s, so second-wide cuts matter.
    run = drive(mock_campaign("trim", dst_query="time=1", file_count=16, concurrency_steps=[2, 4], step_files=8))
    untrimmed = comparison.trimmed_summary(run, comparison.Trim())
    # Nothing trimmed, the buckets give the stored summary's figures (read from the rows).
    for key in ("files_ok", "files_failed", "bytes", "window_seconds"):
        assert untrimmed["total"][key] == pytest.approx(run.summary["total"][key], abs=1e-3), key
    assert untrimmed["total"]["throughput_bps"] == pytest.approx(run.summary["total"]["throughput_bps"], rel=1e-6)
    assert [s["files_ok"] for s in untrimmed["steps"]] == [8, 8]
    for mine, stored in zip(untrimmed["steps"], run.summary["steps"], strict=True):
        assert mine["achieved_mean"] == pytest.approx(stored["achieved_mean"], abs=1e-3)
        assert mine["window_seconds"] == pytest.approx(stored["window_seconds"], abs=1e-3)
    # A warm-up of 1.5 s keeps the seconds from the first whole one after it.
    t0 = run.started_at.timestamp()
    trimmed = comparison.trimmed_summary(run, comparison.Trim(warmup_seconds=1.5))
    first_kept = math.ceil(t0 + 1.5)
    expected = _kept_by_rows(run, lambda k: k >= first_kept)
    assert 0 < trimmed["total"]["files_ok"] == expected["files_ok"] < 16
    assert trimmed["total"]["bytes"] == pytest.approx(expected["bytes"], abs=1)
    assert trimmed["left_out"]["transfers"] == 16 - expected["files_ok"]
    assert trimmed["left_out"]["bucket_seconds"] == 1
    # A restart mid-run: the seconds its margin touches are cut, and their time too.
    starts = sorted(Transfer.objects.filter(run=run).values_list("started_at", flat=True))
    at = starts[8]
    log_event("service_restart", "door restarted", source="collector", time=at)
    around = comparison.trimmed_summary(run, comparison.Trim(event_margin_seconds=0.3))
    lo, hi = math.floor(at.timestamp() - 0.3), math.ceil(at.timestamp() + 0.3)
    expected = _kept_by_rows(run, lambda k: not lo <= k < hi)
    assert around["total"]["files_ok"] == expected["files_ok"] < 16
    assert around["total"]["bytes"] == pytest.approx(expected["bytes"], abs=1)
    [window] = around["left_out"]["windows"]
    assert window == [datetime.fromtimestamp(lo, tz=UTC).isoformat(), datetime.fromtimestamp(hi, tz=UTC).isoformat()]
    ends = [t.timestamp() for t in Transfer.objects.filter(run=run).values_list("finished_at", flat=True)]
    span = max(ends) - min(s.timestamp() for s in starts)
    cut = max(min(hi, max(ends)) - max(lo, min(s.timestamp() for s in starts)), 0)
    assert around["total"]["window_seconds"] == pytest.approx(span - cut, abs=1e-3)


def test_latest_run_of_each_backend(client, viewer):
    first = drive(mock_campaign("per-backend", file_count=5))
    second = runs.create_run(first.campaign, trigger="command")
    RunDriver(second.pk).drive()
    assert [r.pk for r in comparison.latest_per_backend(first.campaign_id)] == [second.pk]
    client.force_login(viewer)
    page = client.get(f"/campaigns/compare/?campaign={first.campaign_id}")
    assert page.status_code == 200 and [r["run"] for r in page.context["result"]["runs"]] == [second.pk]


def test_host_page_metrics_and_event_filters(client, viewer):
    host = Host.objects.create(name="door9")
    log_event("service_restart", "xrootd restarted", source="collector", host=host)
    log_event("note", "a note", source="operator")
    client.force_login(viewer)
    assert client.get(f"/hosts/{host.pk}/").status_code == 200
    body = client.get(f"/hosts/{host.pk}/metrics.json?range=1h").json()
    assert body["host"] == "door9" and body["events"][0]["disturbing"] is True
    page = client.get("/hosts/events/?kind=service_restart")
    assert [e.kind for e in page.context["object_list"]] == ["service_restart"]
    by_host = client.get("/hosts/events/?host__name=door9")
    assert [e.summary for e in by_host.context["object_list"]] == ["xrootd restarted"]
    assert Event.objects.count() == 2


@pytest.mark.parametrize(
    "path", ["/campaigns/", "/campaigns/runs/", "/campaigns/backends/", "/hosts/events/", "/hosts/", "/"]
)
def test_list_pages_cost_the_same_queries_for_1_or_12_rows(
    client, viewer, django_assert_max_num_queries, path, settings
):
    # The user's grants are kept 5 s (storageops.grants): adding the rows took longer than that
    # on a loaded machine, and the grants read again looked like a cost of the rows.
    settings.STORAGEOPS_GRANTS_SECONDS = 3600
    client.force_login(viewer)

    def add_rows(prefix: str, n: int) -> None:
        for i in range(n):
            campaign = mock_campaign(f"{prefix}{i}")
            run = runs.create_run(campaign, trigger="command")
            log_event("note", f"note {i}", source="operator", run=run, host=Host.objects.create(name=f"{prefix}h{i}"))

    add_rows("one", 1)
    client.get(path)  # warm caches (content types, session)
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as small:
        assert client.get(path).status_code == 200
    add_rows("many", 11)
    with django_assert_max_num_queries(len(small.captured_queries)):
        assert client.get(path).status_code == 200


def test_live_runs_ask_for_fresh_partials_every_2_s(client, viewer):
    run = runs.create_run(mock_campaign("live"), trigger="command")  # pending: live, no driver
    client.force_login(viewer)
    progress = client.get(f"/campaigns/runs/{run.pk}/progress/", headers={"HX-Request": "true"})
    assert 'hx-trigger="every 2s"' in progress.content.decode()
    assert "HX-Refresh" not in progress and "HX-Request" in progress["Vary"]
    assert 'data-live="1"' in client.get(f"/campaigns/runs/{run.pk}/").content.decode()
    assert 'hx-trigger="every 2s"' in client.get("/").content.decode()
    assert client.get(f"/campaigns/runs/{run.pk}/charts/timeline.json").json()["live"] is True


def test_a_partial_run_is_amber_with_its_counts_and_operators_can_retry_it(
    client, viewer, operator, django_capture_on_commit_callbacks
):
    first = drive(half_failing_campaign("page-half", file_count=6))
    client.force_login(viewer)
    html = client.get(f"/campaigns/runs/{first.pk}/").content.decode()
    assert 'class="badge badge-partial state-partial"' in html
    assert "3 ok, 3 failed, 0 skipped" in html and ": 3 ok, 3 failed, 0 skipped" in html
    assert "Retry failed" not in html  # a viewer may not start runs
    for path in ("/campaigns/runs/", "/", "/campaigns/", f"/campaigns/{first.campaign_id}/"):
        page = client.get(path).content.decode()
        assert "badge-partial" in page and "3 ok, 3 failed, 0 skipped" in page, path
    assert client.post(f"/campaigns/runs/{first.pk}/retry-failed/").status_code == 403

    client.force_login(operator)
    assert "Retry failed (3)" in client.get(f"/campaigns/runs/{first.pk}/").content.decode()
    with django_capture_on_commit_callbacks(execute=False):
        response = client.post(f"/campaigns/runs/{first.pk}/retry-failed/")
    retry = Run.objects.get(retry_of=first)
    assert response.status_code == 302 and response["Location"] == retry.get_absolute_url()
    RunDriver(retry.pk).drive()  # the frozen snapshot still times out on the odd indices
    html = client.get(retry.get_absolute_url()).content.decode()
    assert f'Retry of <a href="/campaigns/runs/{first.pk}/">#{first.pk}</a>' in html
    assert "3 of 6 planned transfers succeeded (50.0 %)" in html
    assert "Retry failed (3)" in html  # the retry failed in turn: it can be retried
    html = client.get(first.get_absolute_url()).content.decode()
    assert f'Retried by <a href="/campaigns/runs/{retry.pk}/">#{retry.pk}</a>' in html
    assert "Retry failed (" not in html  # retried once: the chain goes on from the retry


def test_every_comparison_chart_is_trimmed_as_the_table(client, viewer, two_runs):
    # Copies of 1 s, four one at a time then four together: a trim cuts whole seconds, so the
    # first step's copies end before the first kept second and the second step's inside it.
    run = drive(mock_campaign("cmp-slow", dst_query="time=1", file_count=8, concurrency_steps=[1, 4], step_files=4))
    starts = sorted(Transfer.objects.filter(run=run).values_list("started_at", flat=True))
    warmup = round((starts[4] - run.started_at).total_seconds(), 3)  # the first step left out
    # Give the run a stored timeline of ten one-second points, so that the over-time gap has
    # points on both sides of the cut.
    origin = run.started_at.timestamp() * 1000
    chart = RunChart.objects.get(run=run)
    chart.data = {**chart.data, "times": [origin + 1000 * k - 500 for k in range(10)], "total": [1e6] * 10}
    chart.save()
    ids = f"{run.pk},{two_runs[1].pk}"
    client.force_login(viewer)
    page = client.get("/campaigns/compare/", {"runs": ids, "warmup": warmup})
    html = page.content.decode()
    assert page.status_code == 200 and "trimmed as the table" in html
    # The charts' data is asked with the table's trim.
    assert f"warmup={warmup}" in html
    table = {r["run"]: r for r in page.context["result"]["runs"]}
    data = client.get("/campaigns/compare/data.json", {"runs": ids, "warmup": warmup}).json()
    untrimmed = client.get("/campaigns/compare/data.json", {"runs": ids}).json()
    assert data["trimmed"] is True and untrimmed["trimmed"] is False
    for series in data["runs"]:
        steps = [s for s in table[series["run"]]["steps"] if s.get("throughput_bps")]
        # The step curve is the trimmed table's, point for point, each at the concurrency it achieved.
        assert series["steps"] == [
            {"x": s["achieved_mean"], "y": s["throughput_bps"], "target": s["concurrency"]} for s in steps
        ]
        assert series["cuts"][0][0] is None  # the warm-up runs from the chart's start
    # Trimmed, the first run's step curve is the second step's alone.
    assert [p["target"] for p in data["runs"][0]["steps"]] == [4]
    assert [p["target"] for p in untrimmed["runs"][0]["steps"]] == [1, 4]
    # Over time, the warm-up is a gap and the rest is the untrimmed curve.
    trimmed, whole = data["runs"][0]["over_time"], untrimmed["runs"][0]["over_time"]
    cut = warmup
    assert [p["x"] for p in trimmed] == [p["x"] for p in whole] == [k - 0.5 for k in range(10)]
    assert [p["y"] for p in trimmed] == [None if p["x"] <= cut else 1e6 for p in whole]
    assert all(p["y"] == 1e6 for p in whole) and all(not r["cuts"] for r in untrimmed["runs"])


def test_viewers_of_a_live_run_share_one_progress_rendering_until_the_run_or_the_second_changes(
    client, viewer, operator, monkeypatch
):
    """Every open run page polls the partial every 2 s, and it shows nothing of the viewer: the
    viewers who ask while the run's figures and the clock's second stay the same get one
    rendering (campaigns.web.shared_partials); a change of the run is shown at the next ask."""
    from django.test import Client

    from campaigns.web import shared_partials

    run = runs.create_run(mock_campaign("shared-progress"), trigger="command")
    Run.objects.filter(pk=run.pk).update(state="running", files_done=3)
    monkeypatch.setattr(shared_partials.time, "time", lambda: 1_800_000_000.0)  # one second
    rendered: list = []
    real = shared_partials.progress

    def counting(run_, render):
        return real(run_, lambda: rendered.append(run_.pk) or render())

    monkeypatch.setattr(shared_partials, "progress", counting)
    other = Client()
    client.force_login(viewer)
    other.force_login(operator)
    first = client.get(f"/campaigns/runs/{run.pk}/progress/").content.decode()
    second = other.get(f"/campaigns/runs/{run.pk}/progress/").content.decode()
    assert first == second and "3 ok" in first and rendered == [run.pk]
    # The run page shows the same block, from the same rendering.
    assert first in client.get(f"/campaigns/runs/{run.pk}/").content.decode() and rendered == [run.pk]
    # A copy more: rendered afresh at once, the same second.
    Run.objects.filter(pk=run.pk).update(files_done=4)
    assert "4 ok" in client.get(f"/campaigns/runs/{run.pk}/progress/").content.decode()
    assert len(rendered) == 2
    # The next second (the ages of the copies in flight): afresh too.
    monkeypatch.setattr(shared_partials.time, "time", lambda: 1_800_000_001.0)
    other.get(f"/campaigns/runs/{run.pk}/progress/")
    assert len(rendered) == 3

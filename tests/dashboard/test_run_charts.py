"""The run page's chart data on a real mock run: SQL aggregates checked against row-by-row
figures, stored at the run's end, and served to the page."""

from __future__ import annotations

from datetime import timedelta

import pytest

from campaigns import runs
from campaigns.models import Run, RunChart, Transfer, TransferBucket, buckets
from campaigns.results import charts, readers
from campaigns.runs.lifecycle import RunDriver
from collectors.events import log_event
from collectors.models import Host, MetricSample
from tests.support.factories import mock_campaign

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def finished_run() -> Run:
    # Half the copies fail with a checksum mismatch on their destination: an error mix to show.
    campaign = mock_campaign("charts", dst_query="time=0.01", file_count=120, concurrency_steps=[2, 4], step_files=60)
    run = runs.create_run(campaign, trigger="command")
    RunDriver(run.pk).drive()
    run.refresh_from_db()
    return run


def _stored_buckets(run: Run) -> dict[tuple, list[float]]:
    rows = TransferBucket.objects.filter(run=run).values_list(
        "run_id", "width", "k", "step", "source_endpoint_id", "destination_endpoint_id", "category", "files_ok",
        "files_failed", "files_cancelled", "moved", "busy", "duration_sum", "first_start", "last_end",
    )  # fmt: skip
    return {tuple(r[:7]): list(r[7:]) for r in rows}


def _assert_same_buckets(stored: dict, reference: dict) -> None:
    assert sorted(stored) == sorted(reference)
    for key, values in stored.items():
        assert values[:3] == reference[key][:3], key  # counts: exact
        assert values[3:] == pytest.approx(reference[key][3:], rel=1e-9, abs=1e-6), key


def test_buckets_written_with_the_records_match_the_rows(finished_run):
    """The buckets the driver's record statements wrote, flush by flush, hold what the final
    rows give when each is spread row by row (buckets.contributions, the Python reference)."""
    rows = Transfer.objects.filter(run=finished_run).values_list(*buckets._ROW_FIELDS)
    reference = buckets.contributions(rows)
    stored = _stored_buckets(finished_run)
    assert {key[1] for key in stored} == {1, 60}
    _assert_same_buckets(stored, reference)
    # The copies and their failures come back exactly, once per width.
    for width in (1, 60):
        mine = [v for key, v in stored.items() if key[1] == width]
        assert sum(v[0] for v in mine) == finished_run.files_done
        assert sum(v[1] for v in mine) == finished_run.files_failed
        assert sum(v[3] for v in mine) == pytest.approx(finished_run.bytes_done, rel=1e-9)
    # Rebuilt from the rows (a run recorded before buckets were written), the same again.
    buckets.rebuild(finished_run.pk)
    _assert_same_buckets(_stored_buckets(finished_run), reference)


def test_timeline_is_stored_at_the_end_and_adds_up_to_the_bytes_moved(finished_run):
    stored = RunChart.objects.get(run=finished_run).data
    assert readers.timeline(finished_run) == stored
    width = stored["bucket_seconds"]
    # Spread over time, the bytes of the successful copies all come back.
    assert sum(stored["total"]) * width == pytest.approx(finished_run.bytes_done, rel=1e-6)
    assert sum(sum(v) for v in stored["doors"].values()) * width == pytest.approx(finished_run.bytes_done, rel=1e-6)
    # Never more copies in flight on average than the largest step allows.
    assert max(stored["active"]) <= 4 + 1e-6
    assert len(stored["times"]) == len(stored["total"]) == len(stored["rolling"])


def test_steps_scatter_and_json_endpoints(client, viewer, finished_run):
    steps = readers.steps(finished_run)
    assert [s["concurrency"] for s in steps] == [2, 4]
    assert all(s["throughput_bps"] > 0 for s in steps)
    sample = charts.scatter(finished_run, points=30)
    assert sample["sampled_every"] == 4 and len(sample["points"]) == 30
    assert all(p["x"] == 1000 for p in sample["points"])
    client.force_login(viewer)
    for name in ("timeline", "steps", "scatter", "errors", "hosts", "events"):
        response = client.get(f"/campaigns/runs/{finished_run.pk}/charts/{name}.json")
        assert response.status_code == 200, name
        body = response.json()
        assert body["live"] is False and body["run"] == finished_run.pk
    events = client.get(f"/campaigns/runs/{finished_run.pk}/charts/events.json").json()["events"]
    assert {e["kind"] for e in events} >= {"run_start", "run_end"}
    assert client.get(f"/campaigns/runs/{finished_run.pk}/charts/nope.json").status_code == 404


def test_error_mix_and_raw_messages(client, viewer):
    campaign = mock_campaign("errs", dst_query="time=1&transfer_errno=28", file_count=6, concurrency_steps=[6])
    run = runs.create_run(campaign, trigger="command")
    RunDriver(run.pk).drive()
    mix = charts.error_mix(run)
    assert sum(m["count"] for m in mix) == 6
    category = mix[0]["category"]
    client.force_login(viewer)
    page = client.get(f"/campaigns/runs/{run.pk}/errors/{category}/")
    assert page.status_code == 200
    messages = charts.error_messages(run, category)
    assert messages and messages[0]["error_message"]
    assert messages[0]["error_message"][:40] in page.content.decode()
    assert client.get(f"/campaigns/runs/{run.pk}/errors/bogus/").status_code == 404


def test_host_metrics_of_the_doors_share_the_run_window(finished_run):
    host = Host.objects.create(name="door-a")
    finished_run.snapshot["destinations"][0]["hosts"] = [{"id": host.pk, "name": host.name}]
    Run.objects.filter(pk=finished_run.pk).update(snapshot=finished_run.snapshot)
    finished_run.refresh_from_db()
    t0 = finished_run.started_at
    samples = [MetricSample(host=host, metric="cpu.percent", time=t0, value=10.0)]
    for iface in ("eth0", "eth1", "lo"):
        samples.append(MetricSample(host=host, metric="net.rx_bps", label=iface, time=t0, value=100.0))
    MetricSample.objects.bulk_create(samples)
    log_event("service_restart", "xrootd restarted", source="collector", host=host, time=t0)
    data = charts.hosts(finished_run)
    assert data["metrics"]["cpu.percent"]["door-a"][0][1] == 10.0
    # Interfaces add up, loopback left out.
    assert data["metrics"]["net.rx_bps"]["door-a"][0][1] == 200.0
    kinds = {e["kind"]: e["disturbing"] for e in charts.events(finished_run)}
    assert kinds["service_restart"] is True and kinds["run_start"] is False


def test_daemon_cpu_disks_and_log_patterns_are_charted_per_label(client, viewer, finished_run):
    """Issue 17: the collectors stored a daemon's CPU, each disk and log-pattern counts, and no
    page drew them. Each label is its own curve (two disks are not one disk at 160 %), gauges are
    averaged over a bucket and log matches summed."""
    host = Host.objects.create(name="door-a")
    finished_run.snapshot["destinations"][0]["hosts"] = [{"id": host.pk, "name": host.name}]
    Run.objects.filter(pk=finished_run.pk).update(snapshot=finished_run.snapshot)
    finished_run.refresh_from_db()
    t0 = finished_run.started_at
    rows = [
        ("proc.cpu_percent", "xrootd", 30.0), ("proc.cpu_percent", "xrootd", 50.0),
        ("proc.cpus_allowed", "xrootd", 2.0), ("proc.cpus_allowed", "xrootd", 2.0),
        ("disk.busy_percent", "sda", 80.0), ("disk.busy_percent", "sdb", 80.0),
        ("log.matches", "checksum_error", 3.0), ("log.matches", "checksum_error", 4.0),
    ]  # fmt: skip
    MetricSample.objects.bulk_create(
        MetricSample(host=host, metric=m, label=label, time=t0, value=v) for m, label, v in rows
    )
    labelled = charts.hosts(finished_run)["labelled"]
    assert labelled["proc.cpu_percent"]["door-a xrootd"][0][1] == pytest.approx(40.0)  # averaged
    assert labelled["proc.cpus_allowed"]["door-a xrootd"][0][1] == 2.0
    assert {k: v[0][1] for k, v in labelled["disk.busy_percent"].items()} == {"door-a sda": 80.0, "door-a sdb": 80.0}
    assert labelled["log.matches"]["door-a checksum_error"][0][1] == 7.0  # summed
    # The host page's JSON names the curves by label alone, over the window asked for.
    query = {"from": (t0 - timedelta(seconds=5)).isoformat(), "to": (t0 + timedelta(seconds=5)).isoformat()}
    client.force_login(viewer)
    body = client.get(f"/hosts/{host.pk}/metrics.json", query).json()
    assert set(body["labelled"]["disk.busy_percent"]) == {"sda", "sdb"}
    assert body["labelled"]["log.matches"]["checksum_error"][0][1] == 7.0
    page = (
        client.get(f"/hosts/{host.pk}/").content.decode() + client.get(finished_run.get_absolute_url()).content.decode()
    )
    for canvas in ('data-labelled="proc.cpu_percent" data-limit="proc.cpus_allowed"', 'data-labelled="log.matches"',
                   'data-labelled="disk.busy_percent"', 'data-labelled="disk.read_bps,disk.write_bps"'):  # fmt: skip
        assert page.count(canvas) == 2, canvas  # on the host page and on the run page

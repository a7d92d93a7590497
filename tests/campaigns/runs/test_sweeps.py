"""Parameter sweeps: a run steps through every point of concurrency by other knobs, each step
records its full point, and each copy is made with its own step's knobs, which the door's own
log proves on real GridFTP copies."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from campaigns import sweeps
from campaigns.models import RunStep, Transfer
from campaigns.results import charts
from tests.campaigns.runs.test_gridftp import check_copies, gsiftp, on_disk, transfer_stats
from tests.campaigns.runs.test_real_transfers import drive, url_path
from tests.support.factories import campaign, endpoint, mock_campaign

pytestmark = pytest.mark.django_db(transaction=True)


def test_points_run_each_setting_of_the_other_axes_at_every_concurrency():
    defaults = {"tpc_mode": "auto", "tcp_buffer_size": 0, "streams": 1, "file_size": 1000}
    points = sweeps.points([1, 2], {"streams": [1, 4]}, defaults)
    assert [(p.streams, p.concurrency) for p in points] == [(1, 1), (1, 2), (4, 1), (4, 2)]
    matrix_points = sweeps.points([8], {"streams": [2, 4], "tcp_buffer_size": [0, 1 << 20]}, defaults)
    assert [(p.tcp_buffer_size, p.streams) for p in matrix_points] == [(0, 2), (0, 4), (1 << 20, 2), (1 << 20, 4)]
    assert sweeps.points([1, 2], {}, defaults) == tuple(
        sweeps.StepPoint(concurrency=c, streams=1, tcp_buffer_size=0, tpc_mode="auto", file_size=1000) for c in (1, 2)
    )


@pytest.mark.parametrize(
    ("sweep", "fields", "message"),
    [
        ({"concurrency": [1, 2]}, {}, "concurrency is swept by the concurrency steps"),
        ({"streams": [0, 4]}, {}, "streams: 0 is outside 1…64"),
        ({"streams": [4, 4]}, {}, "each value once"),
        ({"tpc_mode": ["sideways"]}, {}, "'sideways' is not one of"),
        ([1, 2], {}, 'Give the swept axes as {"streams": [1, 4, 8]}'),
        ({"streams": [1, 2]}, {"kind": "checksum_load"}, "only its concurrency can be swept"),
        ({"streams": list(range(1, 64))}, {"concurrency_steps": [1, 2, 4, 8]}, "252 steps: a run takes at most 200"),
        ({"streams": [1, 2]}, {"step_files": None, "step_seconds": None}, "needs a step length"),
        ({"file_size": [0, 10]}, {}, "file_size: 0 is outside 1…"),
        ({"file_size": [10, 20]}, {"step_files": None, "step_seconds": 5}, "bound the steps by files"),
        ({"file_size": [10, 20]}, {}, "plans 8 files a step over 4 steps: set the file count to 32"),
        ({"file_size": [10, 20]}, {"file_count": 32, "file_mix": [{"count": 32, "size": 10}]}, "no file mix"),
    ],
)
def test_a_sweep_that_cannot_run_is_refused_with_the_reason(sweep, fields, message):
    obj = mock_campaign("refused", file_count=40, step_files=8, concurrency_steps=[1, 2])
    obj.sweep = sweep
    for name, value in fields.items():
        setattr(obj, name, value)
    with pytest.raises(ValidationError) as refused:
        obj.full_clean()
    assert message in " ".join(refused.value.messages), refused.value.messages


def test_each_step_of_a_streams_by_concurrency_matrix_copies_with_its_own_streams(
    gridftp_pair, grid_credentials, client, viewer
):
    """Real GridFTP copies: the storing door logs each file's parallel streams, and each file's
    are its own step's, while a copy of the step before may still be running."""
    one, two = gridftp_pair
    a, b = gsiftp(one, "matrix-a", "matrix", grid_credentials), gsiftp(two, "matrix-b", "matrix", grid_credentials)
    obj = campaign("streams-matrix", [a], [b], file_count=8, file_size=2_000_000, create_sources=True,
                   checksum_mode="both", concurrency_steps=[1, 2], step_files=2, sweep={"streams": [1, 4]})  # fmt: skip
    obj.full_clean()
    run = drive(obj)
    check_copies(run, 8)
    assert run.stop_reason == "concurrency × streams sweep completed"
    points = list(RunStep.objects.filter(run=run).order_by("index").values_list("point", flat=True))
    assert [(p["streams"], p["concurrency"]) for p in points] == [(1, 1), (1, 2), (4, 1), (4, 2)]
    assert all(p["tpc_mode"] == "auto" and p["tcp_buffer_size"] == 0 for p in points)
    # The door's word for each file: STREAMS= in its transfer log, against the file's step.
    logged = {s["FILE"]: s["STREAMS"] for s in transfer_stats(two) if s.get("TYPE") == "STOR"}
    for t in Transfer.objects.filter(run=run):
        assert logged[on_disk(t.destination).as_posix()] == str(points[t.step]["streams"]), (t.step, t.destination)
    # The step table carries each step's point; the chart reads it both ways.
    steps = run.summary["steps"]
    assert [(s["concurrency"], s["streams"]) for s in steps] == [(1, 1), (2, 1), (1, 4), (2, 4)]
    assert all(s["files_ok"] == 2 for s in steps)
    client.force_login(viewer)
    data = client.get(f"/campaigns/runs/{run.pk}/charts/steps.json").json()
    assert data["axes"] == ["streams"]
    assert [(line["label"], [p["target"] for p in line["points"]]) for line in data["by"]["concurrency"]] == [
        ("streams 1", [1, 2]), ("streams 4", [1, 2])]  # fmt: skip
    # Against the concurrency, each step sits at what it achieved (its target is the label's).
    achieved = {s["step"]: s["achieved_mean"] for s in steps}
    assert all(p["x"] == achieved[p["step"]] for line in data["by"]["concurrency"] for p in line["points"])
    assert [(line["label"], [p["x"] for p in line["points"]]) for line in data["by"]["streams"]] == [
        ("concurrency 1", [1, 4]), ("concurrency 2", [1, 4])]  # fmt: skip
    assert data["by"] == {x: charts.series(steps, x, ["streams"]) for x in ("concurrency", "streams")}
    page = client.get(f"/campaigns/runs/{run.pk}/").content.decode()
    assert 'data-axis="streams"' in page and 'id="sweep-matrix"' in page
    csv_body = b"".join(client.get(f"/api/v1/runs/{run.pk}/steps-csv/").streaming_content).decode()
    csv_head = csv_body.splitlines()[0]
    assert csv_head.startswith("step,concurrency,streams,files_ok")
    # The knee is read along the best setting's concurrency row, and says which setting.
    knee = run.summary["verdict"]["knee"]
    assert "streams" in knee and "(the best setting's curve)" in run.summary["verdict"]["headline"]


def test_a_sweep_through_the_mock_plugin_records_every_point():
    obj = mock_campaign("mock-matrix", file_count=12, concurrency_steps=[1, 3], step_files=3,
                        sweep={"tcp_buffer_size": [0, 1 << 20]})  # fmt: skip
    run = drive(obj)
    assert (run.state, run.files_done) == ("succeeded", 12)
    points = list(RunStep.objects.filter(run=run).order_by("index").values_list("point", flat=True))
    assert [(p["tcp_buffer_size"], p["concurrency"]) for p in points] == [(0, 1), (0, 3), (1 << 20, 1), (1 << 20, 3)]
    steps = sorted(Transfer.objects.filter(run=run).values_list("step", flat=True))
    assert steps == [0] * 3 + [1] * 3 + [2] * 3 + [3] * 3


def test_a_file_size_sweep_copies_each_steps_files_at_its_size(xrootd_pair, client, viewer):
    """Real root:// TPC copies: each step's files are planned, created and copied at the step's
    size (on the doors' disks), and the step table and chart take the file size as an axis."""
    door1, door2 = xrootd_pair
    sizes = [1_000_000, 3_000_000]
    src = endpoint("fsize-src", door1.root_url_for("/data/fsize/"))
    dst = endpoint("fsize-dst", door2.root_url_for("/data/fsize/"))
    obj = campaign("file-size-sweep", [src], [dst], file_count=16, create_sources=True, checksum_mode="both",
                   concurrency_steps=[1, 2], step_files=4, sweep={"file_size": sizes})  # fmt: skip
    obj.full_clean()
    run = drive(obj)
    assert run.state == "succeeded" and run.files_done == 16, run.stop_reason
    assert run.planned_bytes == obj.planned_bytes == 8 * sum(sizes)
    assert run.stop_reason == "concurrency × file size sweep completed"
    points = list(RunStep.objects.filter(run=run).order_by("index").values_list("point", flat=True))
    assert [(p["file_size"], p["concurrency"]) for p in points] == [(s, c) for s in sizes for c in (1, 2)]
    for t in Transfer.objects.filter(run=run):
        size = points[t.step]["file_size"]
        assert t.size == size and t.bytes_transferred == size, (t.index, t.step, t.size)
        assert door2.local_path(url_path(t.destination)).stat().st_size == size
    steps = run.summary["steps"]
    assert [(s["concurrency"], s["file_size"], s["bytes"]) for s in steps] == [
        (c, s, 4 * s) for s in sizes for c in (1, 2)]  # fmt: skip
    client.force_login(viewer)
    data = client.get(f"/campaigns/runs/{run.pk}/charts/steps.json").json()
    assert [line["label"] for line in data["by"]["concurrency"]] == ["file size 1 MB", "file size 3 MB"]
    assert [(line["label"], [p["x"] for p in line["points"]]) for line in data["by"]["file_size"]] == [
        ("concurrency 1", sizes), ("concurrency 2", sizes)]  # fmt: skip
    page = client.get(f"/campaigns/runs/{run.pk}/").content.decode()
    assert 'data-axis="file_size"' in page and '<td class="num">3 MB</td>' in page

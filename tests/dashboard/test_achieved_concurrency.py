"""Every place a step is shown gives the concurrency it achieved beside the one it asked for.

Two sweeps driven through the real driver on gfal2's mock plugin (each copy held 1 s), made
to miss their targets the way a real one does, by having fewer copies than slots: a sweep
1, 2, 4 of 4 files a step over 10 files (the step of 4 gets the last 2), and a sweep 3, 4 of 4
files a step over 6 (the step of 3 runs three copies, then one alone; the step of 4 gets 2).
The world's figures are the copies' own start and end times; each view must show them, and
flag the steps that missed.
"""

from __future__ import annotations

import csv
import io
import json
import re

import pytest

from campaigns.management.commands.run_campaign import Command
from campaigns.models import Transfer
from campaigns.results import comparison, concurrency, exports, readers
from tests.support.factories import mock_campaign
from tests.support.runs import drive, running_run

pytestmark = pytest.mark.django_db(transaction=True)


def world(run) -> dict[int, tuple[float, int]]:
    """(mean, max) in flight per step, from the rows' own times."""
    spans: dict[int, list[tuple[float, float]]] = {}
    for step, started, finished in Transfer.objects.filter(run=run).values_list("step", "started_at", "finished_at"):
        spans.setdefault(step, []).append((started.timestamp(), finished.timestamp()))
    return {step: concurrency.in_flight(s) for step, s in spans.items()}


@pytest.fixture
def mixed():
    """Sweep 1, 2, 4 of 4 files a step over 10 files of 1 s: the step of 4 gets 2."""
    return drive(
        mock_campaign("ach-mixed", dst_query="time=1", file_count=10, concurrency_steps=[1, 2, 4], step_files=4)
    )


@pytest.fixture
def all_off():
    """Sweep 3, 4 of 4 files a step over 6 files of 1 s: 2.0 in flight at 3, 2.0 at 4."""
    return drive(mock_campaign("ach-off", dst_query="time=1", file_count=6, concurrency_steps=[3, 4], step_files=4))


def test_the_step_table_of_the_run_page_exports_cli_and_comparison_carry_the_achieved_figures(
    client, viewer, mixed, all_off
):
    steps = readers.steps(mixed)
    seen = world(mixed)
    for s in steps:
        mean, peak = seen[s["step"]]
        assert s["achieved_mean"] == pytest.approx(mean, abs=1e-3) and s["achieved_max"] == peak
    # Two files left for the step of 4: at most 2 at once, off target whatever the timing.
    last = steps[-1]
    assert (last["concurrency"], last["achieved_max"], last["off_target"]) == (4, 2, True), steps
    print("mixed:", [(s["concurrency"], s["achieved_mean"], s["achieved_max"], s["off_target"]) for s in steps])

    client.force_login(viewer)
    page = client.get(mixed.get_absolute_url()).content.decode()
    table = page[page.index('id="step-table"') : page.index("</table>", page.index('id="step-table"'))]
    assert "Achieved" in table and "Max" in table
    assert re.findall(r'data-achieved-mean="([^"]*)"', table) == [f"{s['achieved_mean']}" for s in steps]
    assert re.findall(r'data-achieved-max="([^"]*)"', table) == [str(s["achieved_max"]) for s in steps]
    assert re.findall(r'data-off-target="(\d)"', table) == ["1" if s["off_target"] else "0" for s in steps]
    assert table.count(">off target</span>") == sum(s["off_target"] for s in steps)

    rows = list(csv.DictReader(io.StringIO("".join(exports.steps_csv(mixed)))))
    assert [(r["concurrency"], r["achieved_max"], r["off_target"]) for r in rows] == [
        (str(s["concurrency"]), str(s["achieved_max"]), str(s["off_target"])) for s in steps
    ]
    assert [float(r["achieved_mean"]) for r in rows] == [s["achieved_mean"] for s in steps]
    as_json = json.loads("".join(exports.transfers_json(mixed)))
    assert [(s["achieved_mean"], s["achieved_max"], s["off_target"]) for s in as_json["steps"]] == [
        (s["achieved_mean"], s["achieved_max"], s["off_target"]) for s in steps
    ]
    assert len(as_json["transfers"]) == 10

    out = io.StringIO()
    Command(stdout=out)._report(mixed)
    cli = [line.split() for line in out.getvalue().splitlines() if line.strip()[:1].isdigit()]
    assert [(r[1], r[2], r[3]) for r in cli] == [
        (str(s["concurrency"]), f"{s['achieved_mean']:.2f}", str(s["achieved_max"])) for s in steps
    ]
    assert ["off" in r for r in cli] == [s["off_target"] for s in steps]

    result = comparison.compare([mixed, all_off])
    assert [(s["concurrency"], s["achieved_mean"], s["off_target"]) for s in result["runs"][0]["steps"]] == [
        (s["concurrency"], s["achieved_mean"], s["off_target"]) for s in steps
    ]
    # The comparison's chart puts each step at the concurrency it achieved, its target beside.
    assert comparison.overlay_series([mixed, all_off])["runs"][0]["steps"] == [
        {"x": s["achieved_mean"], "y": s["throughput_bps"], "target": s["concurrency"]} for s in steps
    ]
    compare_html = client.get(f"/campaigns/compare/?runs={mixed.pk}&runs={all_off.pk}").content.decode()
    assert "Per step: copies in flight achieved" in compare_html
    assert f"×4: {last['achieved_mean']:.2f} (max {last['achieved_max']})" in compare_html
    assert compare_html.count('data-step-achieved data-off-target="1"') == sum(
        s["off_target"] for r in result["runs"] for s in r["steps"]
    )


def test_a_live_run_shows_each_steps_achieved_concurrency(client, viewer):
    run = running_run("ach-live")
    client.force_login(viewer)
    html = client.get(f"/campaigns/runs/{run.pk}/progress/").content.decode()
    assert 'id="live-steps"' in html
    # The live table reads the run's buckets: the mean in flight of the copies' own times (the
    # most at once needs the rows, which a live page never walks: shown as unknown).
    seen = world(run)
    assert [float(v) for v in re.findall(r'data-achieved-mean="([^"]*)"', html)] == pytest.approx(
        [seen[0][0], seen[1][0]], abs=1e-3
    )
    assert seen[1][0] == pytest.approx(1.8)  # 4 + 4 + 1 copy-seconds over 5 s
    assert 'id="live-steps"' in client.get(run.get_absolute_url()).content.decode()


def test_the_verdicts_of_real_sweeps_read_what_ran(client, viewer, mixed, all_off):
    verdict = mixed.summary["verdict"]
    print("mixed:", verdict["headline"])
    assert verdict["status"] != "inconclusive" and "Off target: " in verdict["headline"]
    assert re.search(r"×4 (ran )?at \d\.\d\d \(max 2\)", verdict["headline"]), verdict["headline"]
    assert [p["concurrency"] for p in verdict["off_target"]] == [
        s["concurrency"] for s in readers.steps(mixed) if s["off_target"]
    ]
    verdict = all_off.summary["verdict"]
    print("all off:", verdict["headline"])
    assert verdict["status"] == "inconclusive" and verdict["knee"] is None
    assert verdict["headline"].startswith("Inconclusive: no step ran at its target concurrency (×3 ran at ")
    client.force_login(viewer)
    page = client.get(all_off.get_absolute_url()).content.decode()
    assert 'data-verdict-status="inconclusive"' in page and ">inconclusive</span>" in page

"""Comparisons take any swept knob as the steps chart's x axis (issue 18): runs of campaigns that
differ in streams lined up across runs, one line per concurrency; a run that sweeps the knob
keeps its own lines. Mock copies: what is checked is how steps are lined up, not the storage."""

from __future__ import annotations

import pytest

from tests.campaigns.runs.test_real_transfers import drive
from tests.support.factories import mock_campaign

pytestmark = pytest.mark.django_db(transaction=True)


def test_runs_that_differ_in_streams_are_charted_against_streams(client, viewer):
    one = drive(mock_campaign("streams-one", file_count=4, concurrency_steps=[1, 2], step_files=2, streams=1))
    four = drive(mock_campaign("streams-four", file_count=4, concurrency_steps=[1, 2], step_files=2, streams=4))
    swept = drive(mock_campaign("streams-swept", file_count=8, concurrency_steps=[1, 2], step_files=2,
                                sweep={"streams": [2, 8]}))  # fmt: skip
    client.force_login(viewer)

    across = client.get("/campaigns/compare/data.json", {"runs": f"{one.pk},{four.pk}", "x": "streams"}).json()
    assert (across["by"]["x"], across["by"]["label"]) == ("streams", "streams")
    lines = [(line["label"], [p["x"] for p in line["points"]]) for line in across["by"]["lines"]]
    assert lines == [("concurrency 1", [1, 4]), ("concurrency 2", [1, 4])]
    by_run = {r["run"]: {p["target"]: p["y"] for p in r["steps"]} for r in across["runs"]}
    assert [p["y"] for p in across["by"]["lines"][1]["points"]] == [by_run[one.pk][2], by_run[four.pk][2]]

    within = client.get("/campaigns/compare/data.json", {"runs": f"{one.pk},{swept.pk}", "x": "streams"}).json()
    lines = [(line["label"], [p["x"] for p in line["points"]]) for line in within["by"]["lines"]]
    assert lines == [
        (f"streams-one #{one.pk} · concurrency 1", [1]),  # its steps hold streams at 1: a point each
        (f"streams-one #{one.pk} · concurrency 2", [1]),
        (f"streams-swept #{swept.pk} · concurrency 1", [2, 8]),
        (f"streams-swept #{swept.pk} · concurrency 2", [2, 8]),
    ], lines

    page = client.get("/campaigns/compare/", {"runs": f"{one.pk},{four.pk}", "x": "streams"}).content.decode()
    assert "Throughput vs streams" in page and "x=streams" in page
    refused = client.get("/campaigns/compare/data.json", {"runs": f"{one.pk},{four.pk}", "x": "colour"})
    assert refused.status_code == 400 and "x" in refused.json()["error"]["fields"]

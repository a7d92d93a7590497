"""The CSV exports carry every column the pages show, new ones appended after the old ones so a
reader picking columns by position still finds them: the steps CSV a step's warm-up and
measurement start, the transfers CSV whether a cancelled copy was found whole on its destination."""

from __future__ import annotations

import csv
import io
import json
from datetime import timedelta

import pytest
from django.utils import timezone

from campaigns.models import Run, RunStep, Transfer
from campaigns.results.finalize import compute_summary
from tests.support.factories import mock_campaign
from tests.support.runs import drive

pytestmark = pytest.mark.django_db(transaction=True)


def read_csv(client, url: str) -> tuple[list[str], list[dict]]:
    text = b"".join(client.get(url).streaming_content).decode()
    return next(csv.reader(io.StringIO(text))), list(csv.DictReader(io.StringIO(text)))


def test_the_steps_csv_ends_with_the_warmup_and_the_measurement_start(client, viewer):
    run = drive(mock_campaign("csv-warmup", dst_query="time=1", file_count=4, concurrency_steps=[1, 2], step_files=2))
    # What the FTS engine records of a step it ran below its concurrency at first; the results
    # as finalize writes them with it.
    second = RunStep.objects.get(run=run, index=1)
    measured_from = second.started_at + timedelta(milliseconds=500)
    RunStep.objects.filter(pk=second.pk).update(measured_from=measured_from)
    Run.objects.filter(pk=run.pk).update(summary=compute_summary(run, timezone.now()))

    client.force_login(viewer)
    header, rows = read_csv(client, f"/api/v1/runs/{run.pk}/steps-csv/")
    assert header[-7:-2] == ["achieved_mean", "achieved_max", "off_target", "warmup_seconds", "measured_from"]
    assert [(r["step"], r["warmup_seconds"], r["measured_from"]) for r in rows] == [
        ("0", "", ""),
        ("1", "0.5", measured_from.isoformat()),
    ]
    page = client.get(run.get_absolute_url()).content.decode()
    assert 'data-warmup="0.5"' in page


def test_the_transfers_csv_ends_with_complete_on_destination(client, viewer):
    run = drive(mock_campaign("csv-complete", file_count=3))
    # What the FTS engine records of cancelled copies it checked on the destination.
    for index, complete in ((0, True), (1, False)):
        Transfer.objects.filter(run=run, index=index).update(complete_on_destination=complete)

    client.force_login(viewer)
    header, rows = read_csv(client, f"/api/v1/runs/{run.pk}/export/?as=csv")
    assert header[-2:] == ["fts_file_id", "complete_on_destination"]
    assert header.index("copy_mode") == 15  # where it was: the columns before stay in place
    assert [(r["index"], r["complete_on_destination"]) for r in rows] == [("0", "True"), ("1", "False"), ("2", "")]
    listed = client.get(f"/api/v1/transfers/?run={run.pk}").json()
    shown = {t["index"]: t for t in listed.get("results", listed)}
    assert {i: t["complete_on_destination"] for i, t in shown.items()} == {0: True, 1: False, 2: None}
    # The copy mode the API gives each transfer, the CSV gives too.
    assert [r["copy_mode"] for r in rows] == [shown[i]["copy_mode"] for i in range(3)]


def test_the_steps_csv_ends_with_the_scheduling_gap(client, viewer):
    """Each step's refill gap (campaigns.results.scheduling_gap) is the steps CSV's last two
    columns, as the summary has it: a gfal2 copy thread starts its next copy at once (~0 s)."""
    run = drive(mock_campaign("csv-gap", dst_query="time=1", file_count=6, concurrency_steps=[1, 2], step_files=3))
    client.force_login(viewer)
    header, rows = read_csv(client, f"/api/v1/runs/{run.pk}/steps-csv/")
    assert header[-2:] == ["gap_seconds", "gaps"]
    steps = {str(s["step"]): s for s in run.summary["steps"]}
    for row in rows:
        step = steps[row["step"]]
        assert (float(row["gap_seconds"]), int(row["gaps"])) == (step["gap_seconds"], step["gaps"]), row
        assert step["gap_seconds"] < 0.5 and step["gaps"] >= 1, step


def test_fts_ids_keep_their_columns_in_the_exports_and_the_api(client, viewer, django_assert_max_num_queries):
    """FTS's ids of a transfer live in the FTS app's table (FtsTransfer), and the exports and the
    API read them through campaigns.models.transfer_extras: same names, same places, "" and
    null for a transfer FTS holds nothing of, and no query per transfer."""
    from campaigns.results import exports
    from campaigns.runs.engines.fts.models import FtsTransfer

    run = drive(mock_campaign("csv-fts-ids", file_count=3))
    transfers = {t.index: t for t in Transfer.objects.filter(run=run)}
    FtsTransfer.objects.create(transfer=transfers[0], job_id="job-a", file_id=11)
    FtsTransfer.objects.create(transfer=transfers[1], job_id="job-a")  # submitted, not reported yet

    client.force_login(viewer)
    header, rows = read_csv(client, f"/api/v1/runs/{run.pk}/export/?as=csv")
    assert header[-3:] == ["fts_job_id", "fts_file_id", "complete_on_destination"]
    assert header.index("fts_job_id") == 19  # after transfer_host, where Transfer's columns were
    assert [(r["fts_job_id"], r["fts_file_id"]) for r in rows] == [("job-a", "11"), ("job-a", ""), ("", "")]
    as_json = json.loads("".join(exports.transfers_json(run)))["transfers"]
    assert [(t["fts_job_id"], t["fts_file_id"]) for t in as_json] == [("job-a", 11), ("job-a", None), ("", None)]

    with django_assert_max_num_queries(6):
        listed = client.get(f"/api/v1/transfers/?run={run.pk}").json()
    shown = {t["index"]: (t["fts_job_id"], t["fts_file_id"]) for t in listed.get("results", listed)}
    assert shown == {0: ("job-a", 11), 1: ("job-a", None), 2: ("", None)}
    assert list(listed["results"][0]).index("fts_job_id") == list(listed["results"][0]).index("transfer_host") - 2

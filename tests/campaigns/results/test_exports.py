"""The CSV exports carry every column the pages show, new ones appended after the old ones so a
reader picking columns by position still finds them: the steps CSV a step's warm-up and
measurement start, the transfers CSV whether a cancelled copy was found whole on its destination."""

from __future__ import annotations

import csv
import io
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
    assert header[-5:] == ["achieved_mean", "achieved_max", "off_target", "warmup_seconds", "measured_from"]
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

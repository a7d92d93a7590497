"""The driver's record and mark-started statements write exactly what the copies reported:
every column of a row, to the microsecond, whatever text a server answered with."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from campaigns import runs
from campaigns.models import Transfer
from campaigns.runs import store
from campaigns.runs.engines.copies import CopyResult
from campaigns.runs.planning import PlannedTransfer
from tests.support.factories import mock_campaign

pytestmark = pytest.mark.django_db(transaction=True)

# A server's answer as it may come: quotes, backslashes, JSON's own syntax, other scripts, a NUL.
HOSTILE = 'open "/data/x" failed: \\ {"a": [1]}\n\tdéjà vu ✓ ÿ\x00 end'


def _claimed(files: int):
    campaign = mock_campaign("record", file_count=files)
    run = runs.create_run(campaign, trigger="command")
    src, dst = campaign.sources.get(), campaign.destinations.get()
    store.insert_plan(
        run.pk,
        (PlannedTransfer(i, f"mock://s/{i}", f"mock://d/{i}", 1000 + i, src.pk, dst.pk) for i in range(files)),
    )
    return run, store.claim(run.pk, files, 0, "me")


def test_every_column_written_as_reported():
    run, jobs = _claimed(3)
    t0 = 1_795_000_000.123457  # a start that is not a whole microsecond in binary
    results = [
        CopyResult(jobs[0], True, t0, t0 + 2.5, 2.5, source_checksum="ad:1", destination_checksum="ad:1",
                   copy_mode="streamed", host="client-1"),
        CopyResult(jobs[1], False, t0 + 0.000001, t0 + 1, 0.999999, code=5, message=HOSTILE, category="http_5xx"),
        CopyResult(jobs[2], False, t0, t0 + 3, 3.0, message="cancelled by the run", category="cancelled"),
    ]  # fmt: skip
    deltas = store.record(run.pk, results, retries=0, executor="me")
    assert deltas == {"done": 1, "failed": 1, "cancelled": 1, "bytes": jobs[0].size, "requeued": 0}
    rows = {t.pk: t for t in Transfer.objects.filter(run=run)}
    ok, failed, cancelled = (rows[j.id] for j in jobs)
    assert ok.state == "succeeded" and failed.state == "failed" and cancelled.state == "cancelled"
    # The microsecond datetime the epoch float names, exactly.
    assert ok.started_at == datetime.fromtimestamp(t0, tz=UTC) and ok.started_at.microsecond == 123457
    assert failed.started_at == datetime.fromtimestamp(t0 + 0.000001, tz=UTC)
    assert ok.finished_at == datetime.fromtimestamp(t0 + 2.5, tz=UTC)
    assert ok.duration == 2.5 and failed.duration == 0.999999
    assert ok.bytes_transferred == jobs[0].size and failed.bytes_transferred == 0
    assert ok.throughput_bps == jobs[0].size / 2.5 and failed.throughput_bps is None
    assert (ok.source_checksum, ok.destination_checksum, ok.copy_mode, ok.transfer_host) == (
        "ad:1", "ad:1", "streamed", "client-1"
    )  # fmt: skip
    assert failed.error_code == 5 and ok.error_code is None
    assert failed.error_message == HOSTILE.replace("\x00", "")
    assert failed.error_category == "http_5xx" and cancelled.error_category == "cancelled"
    run.refresh_from_db()
    assert (run.files_done, run.files_failed, run.files_cancelled) == (1, 1, 1)


def test_only_rows_this_executor_holds_are_written():
    run, jobs = _claimed(2)
    t0 = 1_795_000_000.0
    store.record(run.pk, [CopyResult(jobs[0], True, t0, t0 + 1, 1.0)], retries=0, executor="another")
    assert Transfer.objects.get(pk=jobs[0].id).state == "active"
    assert not run.buckets.exists()
    store.record(run.pk, [CopyResult(jobs[1], True, t0, t0 + 1, 1.0)], retries=0, executor="me")
    assert Transfer.objects.get(pk=jobs[1].id).state == "succeeded"
    # The buckets count only the row the statement made final.
    assert sum(b.files_ok for b in run.buckets.filter(width=1)) == 1


def test_mark_started_sets_each_start_once():
    run, jobs = _claimed(2)
    t0 = 1_795_000_000.654321
    assert store.mark_started(run.pk, "me", [(jobs[0].id, t0), (jobs[1].id, t0 + 1)]) == 2
    assert store.mark_started(run.pk, "me", [(jobs[0].id, t0 + 5)]) == 0  # already marked
    assert store.mark_started(run.pk, "other", [(jobs[1].id, t0 + 5)]) == 0
    got = dict(Transfer.objects.filter(run=run).values_list("id", "started_at"))
    assert got == {jobs[0].id: datetime.fromtimestamp(t0, tz=UTC), jobs[1].id: datetime.fromtimestamp(t0 + 1, tz=UTC)}

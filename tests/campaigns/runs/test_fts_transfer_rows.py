"""FtsTransfer rows go with their transfers, deleted by the database (ON DELETE CASCADE), so that
Transfer stays fast to delete: a run's or a retention batch's transfers go in one DELETE,
never read into memory."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.models.deletion import Collector
from django.test.utils import CaptureQueriesContext

from campaigns.models import Transfer
from campaigns.runs.engines.fts.models import FtsTransfer
from tests.support.factories import mock_campaign
from tests.support.runs import drive

pytestmark = pytest.mark.django_db(transaction=True)


def test_fts_rows_go_with_their_transfers_and_their_run_in_the_database():
    run = drive(mock_campaign("fts-rows", file_count=4))
    other = drive(mock_campaign("fts-rows-kept", file_count=1))
    for transfer in Transfer.objects.filter(run__in=[run, other]):
        FtsTransfer.objects.create(transfer=transfer, job_id=f"job-{transfer.run_id}", file_id=transfer.pk)
    assert Collector(using="default").can_fast_delete(Transfer.objects.filter(run=run))

    first_two = Transfer.objects.filter(run=run, index__lt=2)
    with CaptureQueriesContext(connection) as queries:
        first_two.delete()
    statements = [q["sql"].split()[0] for q in queries.captured_queries]
    assert [s for s in statements if s not in ("BEGIN", "COMMIT")] == ["DELETE"]  # nothing read first
    assert FtsTransfer.objects.filter(transfer__run=run).count() == 2

    run.delete()
    assert set(FtsTransfer.objects.values_list("job_id", flat=True)) == {f"job-{other.pk}"}

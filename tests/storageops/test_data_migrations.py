"""The data migrations carry copies of the code they ran: on today's tables the copy must do
what the live code does (campaigns 0013 against campaigns.models.buckets.rebuild)."""

from __future__ import annotations

import importlib
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.apps import apps
from django.db import connection
from django.utils import timezone

from campaigns.models import Run, Transfer, TransferBucket, buckets
from tests.support.factories import mock_campaign

pytestmark = pytest.mark.django_db

BUILD_BUCKETS = importlib.import_module("campaigns.migrations.0013_build_buckets_of_earlier_runs")


def _rows() -> list[tuple]:
    fields = [f.attname for f in TransferBucket._meta.concrete_fields if f.name != "id"]
    return sorted(TransferBucket.objects.values_list(*fields))


def test_the_copied_bucket_builder_builds_what_the_live_one_builds():
    campaign = mock_campaign("buckets")
    src, dst = campaign.sources.get(), campaign.destinations.get()
    start = timezone.now().replace(microsecond=0) - timedelta(hours=1)
    run = Run.objects.create(campaign=campaign, state="partial")
    for i, (state, seconds, step) in enumerate(
        [
            ("succeeded", 0.4, 0),
            ("succeeded", 75.5, 0),
            ("failed", 3, 1),
            ("cancelled", 130, 1),
            ("skipped", 0, None),
            ("queued", 0, 1),
        ]
    ):
        Transfer.objects.create(
            run=run, index=i, step=step, source=f"mock://src/{i}", destination=f"mock://dst/{i}",
            source_endpoint=src, destination_endpoint=dst, size=10**9, state=state,
            started_at=start + timedelta(seconds=7 * i) if seconds else None,
            finished_at=start + timedelta(seconds=7 * i + seconds) if seconds else None,
            duration=seconds or None, bytes_transferred=10**9 if state == "succeeded" else 4096,
            error_category="network" if state == "failed" else "",
        )  # fmt: skip
    TransferBucket.objects.all().delete()
    buckets.rebuild(run.pk)
    live = _rows()
    assert len(live) > 100  # the 75 s and 130 s copies span many 1 s buckets
    TransferBucket.objects.all().delete()
    BUILD_BUCKETS.build(apps, SimpleNamespace(connection=connection))
    assert _rows() == live

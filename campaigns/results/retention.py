"""Retention: old transfers and raw samples go, what the pages and comparisons show stays.

Before a finished run loses its transfer rows (or the samples of its window), the figures
read from them are added to its results (finalize.add): the run summary itself is already there
(finalize writes it when the run ends), retention adds the door CPU the comparisons show and
a throughput series. Runs, their steps and summaries, and events are never deleted.
Transfers go run by run in batches, each batch its own transaction; a run still in flight
is never touched, and no sample newer than the oldest run in flight is rolled up.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Min, Q
from django.utils import timezone

from campaigns.choices import ACTIVE_RUN_STATES, FINAL_RUN_STATES
from campaigns.models import Run, Transfer, TransferBucket
from campaigns.results import analysis, readers
from campaigns.results.finalize import add
from collectors.retention import roll_up_samples

log = logging.getLogger(__name__)
SERIES_BUCKET_SECONDS = 60


def _age(days: int | None, default_days: int) -> timedelta | None:
    days = default_days if days is None else days
    return timedelta(days=days) if days else None


def freeze(run: Run, now: datetime) -> None:
    """Keep in the run's results what would otherwise be computed from rows retention deletes."""
    add(run, "door_cpu_percent", readers.door_cpu(run))
    add(run, f"series_{SERIES_BUCKET_SECONDS}s", analysis.throughput_series(run, SERIES_BUCKET_SECONDS))
    # Last: "archived" marks the run as frozen, so a pass cut short freezes it again next time.
    add(run, "archived", {"at": now.isoformat(), "transfers_deleted": 0})


def delete_transfers(run: Run, batch: int) -> int:
    deleted = 0
    while True:
        ids = list(Transfer.objects.filter(run=run).order_by().values_list("pk", flat=True)[:batch])
        if not ids:
            break
        deleted += Transfer.objects.filter(pk__in=ids).delete()[0]
    # The minute buckets stay, for trimmed comparisons of the run; the second ones (sixty times
    # as many rows) go with the rows.
    TransferBucket.objects.filter(run=run, width=1).delete()
    add(run, "archived", {**run.summary.get("archived", {}), "transfers_deleted": deleted})
    return deleted


def apply_retention(
    now: datetime | None = None,
    *,
    transfer_days: int | None = None,
    sample_days: int | None = None,
    batch: int | None = None,
) -> dict:
    now = now or timezone.now()
    transfer_age = _age(transfer_days, settings.STORAGEOPS_TRANSFER_RETENTION_DAYS)
    sample_age = _age(sample_days, settings.STORAGEOPS_SAMPLE_RETENTION_DAYS)
    batch = batch or settings.STORAGEOPS_RETENTION_BATCH
    report = {"runs_frozen": 0, "transfers_deleted": 0, "samples_deleted": 0, "rollups_written": 0}

    transfer_cutoff = now - transfer_age if transfer_age else None
    sample_cutoff = now - sample_age if sample_age else None
    if sample_cutoff is not None:
        # A run in flight still needs its window's raw samples for its own figures.
        oldest_live = Run.objects.filter(state__in=ACTIVE_RUN_STATES).aggregate(t=Min("created"))["t"]
        if oldest_live is not None:
            sample_cutoff = min(sample_cutoff, oldest_live)

    touched = Q(pk__in=[])
    if transfer_cutoff is not None:
        touched |= Q(finished_at__lt=transfer_cutoff)
    if sample_cutoff is not None:
        touched |= Q(started_at__lt=sample_cutoff)
    finished = Run.objects.filter(state__in=FINAL_RUN_STATES)
    for run in finished.filter(touched).exclude(summary__has_key="archived").iterator():
        freeze(run, now)
        report["runs_frozen"] += 1

    if transfer_cutoff is not None:
        for run in finished.filter(finished_at__lt=transfer_cutoff, transfers__isnull=False).distinct():
            report["transfers_deleted"] += delete_transfers(run, batch)
    if sample_cutoff is not None:
        deleted, written = roll_up_samples(sample_cutoff, settings.STORAGEOPS_SAMPLE_ROLLUP_SECONDS)
        report["samples_deleted"], report["rollups_written"] = deleted, written
    log.info("retention: %s", report)
    return report

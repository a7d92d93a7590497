"""Downsampling of old metric samples: raw samples become per-bucket roll-ups, then go.

Work goes one hour of samples at a time, each hour in its own transaction (roll-ups
written and raw rows deleted together), so an interrupted pass leaves nothing counted
twice and the next pass goes on where it stopped.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.db import transaction

from collectors.models import MetricRollup, MetricSample

HOUR = 3600


def _floor(moment: datetime, seconds: int) -> datetime:
    epoch = int(moment.timestamp())
    return datetime.fromtimestamp(epoch - epoch % seconds, tz=UTC)


def roll_up_samples(cutoff: datetime, bucket_seconds: int) -> tuple[int, int]:
    """Roll up and delete raw samples older than `cutoff`; returns (samples deleted, roll-ups written)."""
    cutoff = _floor(cutoff, bucket_seconds)  # a bucket is rolled up whole or not at all
    deleted = written = 0
    while True:
        oldest = MetricSample.objects.filter(time__lt=cutoff).order_by("time").values_list("time", flat=True).first()
        if oldest is None:
            return deleted, written
        lo = _floor(oldest, HOUR)
        hi = min(lo + timedelta(seconds=HOUR), cutoff)
        with transaction.atomic():
            rows = MetricSample.objects.filter(time__gte=lo, time__lt=hi)
            buckets: dict[tuple, list[float]] = {}
            for host_id, metric, label, time, value in rows.values_list("host_id", "metric", "label", "time", "value"):
                key = (host_id, metric, label, _floor(time, bucket_seconds))
                acc = buckets.get(key)
                if acc is None:
                    buckets[key] = [1, value, value, value]
                else:
                    acc[0] += 1
                    acc[1] += value
                    acc[2] = min(acc[2], value)
                    acc[3] = max(acc[3], value)
            MetricRollup.objects.bulk_create(
                MetricRollup(
                    host_id=host_id,
                    metric=metric,
                    label=label,
                    time=start,
                    seconds=bucket_seconds,
                    count=n,
                    mean=total / n,
                    minimum=low,
                    maximum=high,
                )
                for (host_id, metric, label, start), (n, total, low, high) in buckets.items()
            )
            count, _ = rows.delete()
        deleted += count
        written += len(buckets)

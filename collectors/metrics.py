"""The collectors' figure on /metrics (storageops.metrics serves the page): how long ago each
host's collector was last seen."""

from __future__ import annotations

from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily

from collectors.models import Host


class HostsCollector:
    def collect(self):
        seen = GaugeMetricFamily(
            "storageops_collector_last_seen_age_seconds", "Seconds since each host's collector was seen.",
            labels=["host"],
        )  # fmt: skip
        now = timezone.now()
        for name, last_seen in Host.objects.exclude(last_seen=None).values_list("name", "last_seen"):
            seen.add_metric([name], (now - last_seen).total_seconds())
        yield seen

"""Prometheus /metrics for the control plane itself, so a site's Grafana can chart StorageOps:
runs by state, transfers finished by state, bytes moved, collectors' last-seen ages.

Figures are read from the database at scrape time (a handful of aggregate queries), so every
web process answers the same and nothing is lost on restart. If STORAGEOPS_METRICS_TOKEN is
set, the scraper must send it as a bearer token.
"""

from __future__ import annotations

import hmac

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.db.models import Count, OuterRef, Subquery, Sum
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from campaigns.choices import ACTIVE_RUN_STATES, RunState
from campaigns.models import Run
from collectors.models import Host


class ControlPlaneCollector:
    def collect(self):
        runs = GaugeMetricFamily("storageops_runs", "Runs by state.", labels=["state"])
        counts = dict(Run.objects.values_list("state").annotate(n=Count("id")))
        for state in RunState.values:
            runs.add_metric([state], counts.get(state, 0))
        yield runs

        totals = Run.objects.aggregate(
            done=Sum("files_done"), failed=Sum("files_failed"), skipped=Sum("files_skipped"), moved=Sum("bytes_done")
        )
        finished = CounterMetricFamily(
            "storageops_transfers_finished", "Transfers that reached a final state.", labels=["state"]
        )
        for label, key in (("succeeded", "done"), ("failed", "failed"), ("skipped", "skipped")):
            finished.add_metric([label], totals[key] or 0)
        yield finished
        yield CounterMetricFamily(
            "storageops_bytes_moved", "Bytes moved by successful transfers.", totals["moved"] or 0
        )

        stalled = Run.objects.filter(state__in=ACTIVE_RUN_STATES, stalled_since__isnull=False).count()
        yield GaugeMetricFamily("storageops_runs_stalled", "Live runs whose copies stopped finishing.", stalled)

        # The latest finished run of each campaign, judged against its history (1: regressed).
        regressed = GaugeMetricFamily(
            "storageops_campaign_regressed", "1 when a campaign's latest finished run regressed against its history.",
            labels=["campaign"],
        )  # fmt: skip
        for name, status in _latest_per_campaign():
            regressed.add_metric([name], 1 if status == "regressed" else 0)
        yield regressed

        seen = GaugeMetricFamily(
            "storageops_collector_last_seen_age_seconds", "Seconds since each host's collector was seen.",
            labels=["host"],
        )  # fmt: skip
        now = timezone.now()
        for name, last_seen in Host.objects.exclude(last_seen=None).values_list("name", "last_seen"):
            seen.add_metric([name], (now - last_seen).total_seconds())
        yield seen


def _latest_per_campaign():
    """Each campaign's latest finished run's judgement status (one correlated subquery)."""
    latest = Run.objects.filter(campaign=OuterRef("campaign"), finished_at__isnull=False).order_by("-finished_at")
    return Run.objects.filter(finished_at__isnull=False, pk=Subquery(latest.values("pk")[:1])).values_list(
        "campaign__name", "summary__judgement__status"
    )


@login_not_required
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    expected = settings.STORAGEOPS_METRICS_TOKEN
    if expected:
        sent = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        if not hmac.compare_digest(sent, expected):
            return HttpResponse("metrics need the configured bearer token\n", status=401, content_type="text/plain")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ControlPlaneCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)

"""The campaigns' figures on /metrics (storageops.metrics serves the page): runs by state,
transfers finished by state, bytes moved, stalled runs, and each campaign's latest verdict."""

from __future__ import annotations

from django.db.models import Count, OuterRef, Subquery, Sum
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from campaigns.choices import ACTIVE_RUN_STATES, RunState
from campaigns.models import Run


class RunsCollector:
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


def _latest_per_campaign():
    """Each campaign's latest finished run's judgement status (one correlated subquery)."""
    latest = Run.objects.filter(campaign=OuterRef("campaign"), finished_at__isnull=False).order_by("-finished_at")
    return Run.objects.filter(finished_at__isnull=False, pk=Subquery(latest.values("pk")[:1])).values_list(
        "campaign__name", "summary__judgement__status"
    )

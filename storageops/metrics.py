"""Prometheus /metrics for the control plane itself, so a site's Grafana can chart StorageOps:
runs by state, transfers finished by state, bytes moved, collectors' last-seen ages.

storageops serves the page; the figures come from the apps (storageops imports none of them),
each registering a collector in its AppConfig.ready() (campaigns: runs, transfers, bytes,
verdicts; collectors: hosts' last-seen ages). Figures are read from the database at scrape time
(a handful of aggregate queries), so every web process answers the same and nothing is lost on
restart. If STORAGEOPS_METRICS_TOKEN is
set, the scraper must send it as a bearer token.
"""

from __future__ import annotations

import hmac

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

_collectors: dict[str, object] = {}


def register(label: str, collector) -> None:
    """An app's figures for /metrics, added in its AppConfig.ready(): `collector` has the
    prometheus_client custom-collector method `collect()`, yielding metric families."""
    _collectors[label] = collector


@login_not_required
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    expected = settings.STORAGEOPS_METRICS_TOKEN
    if expected:
        sent = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        if not hmac.compare_digest(sent, expected):
            return HttpResponse("metrics need the configured bearer token\n", status=401, content_type="text/plain")
    registry = CollectorRegistry(auto_describe=False)
    for collector in _collectors.values():
        registry.register(collector)
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)

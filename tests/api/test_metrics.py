"""/metrics speaks Prometheus' text format about the control plane itself."""

from __future__ import annotations

import re
import time
from datetime import timedelta

import pytest
import yaml
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from campaigns.models import Run
from collectors.models import Host
from tests.support.factories import mock_campaign
from tests.support.processes import ROOT

pytestmark = pytest.mark.django_db


def samples(body: str) -> dict:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(body) for s in family.samples}  # fmt: skip


def test_metrics_report_runs_transfers_bytes_and_collectors(client, settings):
    campaign = mock_campaign("metrics")
    Run.objects.create(campaign=campaign, state="running", files_done=5, files_failed=1, bytes_done=5000)
    Run.objects.create(campaign=campaign, state="succeeded", files_done=10, bytes_done=10000)
    Run.objects.create(
        campaign=campaign, state="partial", files_done=3, files_failed=2, files_skipped=4, bytes_done=3000
    )
    began = time.monotonic()
    Host.objects.create(name="door1", last_seen=timezone.now() - timedelta(seconds=30))
    response = client.get("/metrics")
    waited = time.monotonic() - began  # however long a busy machine held this test up
    assert response.status_code == 200
    values = samples(response.content.decode())
    assert values[("storageops_runs", (("state", "running"),))] == 1
    assert values[("storageops_runs", (("state", "succeeded"),))] == 1
    assert values[("storageops_runs", (("state", "partial"),))] == 1  # finished, with failures
    assert values[("storageops_runs", (("state", "failed"),))] == 0
    assert values[("storageops_transfers_finished_total", (("state", "succeeded"),))] == 18
    assert values[("storageops_transfers_finished_total", (("state", "failed"),))] == 3
    assert values[("storageops_transfers_finished_total", (("state", "skipped"),))] == 4
    assert values[("storageops_bytes_moved_total", ())] == 18000
    assert 30 <= values[("storageops_collector_last_seen_age_seconds", (("host", "door1"),))] <= 30 + waited + 1

    settings.STORAGEOPS_METRICS_TOKEN = "scrape-secret"
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-secret").status_code == 200


def test_the_alert_rules_read_only_metrics_this_endpoint_serves(client):
    campaign = mock_campaign("rules")
    Run.objects.create(campaign=campaign, state="succeeded", finished_at=timezone.now(),
                       summary={"judgement": {"status": "regressed"}})  # fmt: skip
    Run.objects.create(campaign=campaign, state="running", stalled_since=timezone.now())
    Host.objects.create(name="door9", last_seen=timezone.now())
    values = samples(client.get("/metrics").content.decode())
    assert values[("storageops_campaign_regressed", (("campaign", "rules"),))] == 1
    assert values[("storageops_runs_stalled", ())] == 1
    served = {name for name, _ in values}
    rules = yaml.safe_load((ROOT / "deploy" / "prometheus" / "storageops-alerts.yml").read_text())
    exprs = [rule["expr"] for group in rules["groups"] for rule in group["rules"]]
    assert len(exprs) == 4
    for expr in exprs:
        named = set(re.findall(r"\bstorageops_[a-z_]+", expr))
        assert named and named <= served, (expr, named - served)

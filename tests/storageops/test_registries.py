"""storageops imports no app: what it serves of them comes from the registries they fill in
their AppConfig.ready(). These check that every app's part arrives."""

from __future__ import annotations

import pytest
from django.utils import timezone

from collectors.models import Host
from storageops import tasks
from storageops.models import ChangeRecord
from tests.support.api import api

pytestmark = pytest.mark.django_db


def test_the_retention_task_runs_campaigns_pass_through_the_registry():
    report = tasks.retention()
    assert set(report) == {"campaigns"}
    assert {"runs_frozen", "transfers_deleted", "samples_deleted"} <= set(report["campaigns"])


def test_the_api_root_lists_the_routes_of_every_app(viewer):
    listed = api(viewer, "viewer").get("/api/v1/").json()
    assert {"backends", "runs", "transfers", "hosts", "events", "samples", "alert-subscriptions",
            "alert-deliveries"} <= set(listed)  # fmt: skip
    assert api(viewer, "viewer").get("/api/v1/compare/?runs=").status_code in (200, 400)


def test_collectors_registers_its_host_for_the_change_log():
    host = Host.objects.create(name="door9")
    assert ChangeRecord.objects.filter(object_type="collectors.host", object_id=host.pk, action="create").exists()


def test_metrics_carry_the_figures_of_campaigns_and_collectors(client):
    Host.objects.create(name="door9", last_seen=timezone.now())
    text = client.get("/metrics").content.decode()
    assert "storageops_runs{" in text  # campaigns.metrics
    assert 'storageops_collector_last_seen_age_seconds{host="door9"}' in text  # collectors.metrics

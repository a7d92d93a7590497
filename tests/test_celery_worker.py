"""Tasks really travel through the broker to a separate worker process and back."""

from __future__ import annotations

import os

import pytest
from django.conf import settings

from storageops.tasks import ping


def test_task_round_trip_through_a_real_worker(worker):
    result = ping.delay("hello").get(timeout=60)
    assert result["pong"] == "hello"
    assert result["pid"] != os.getpid()
    assert settings.CELERY_BROKER_URL.split(":")[0] in worker.log_text()


@pytest.mark.django_db
def test_healthz_names_the_broker_transport(client):
    body = client.get("/healthz").json()
    assert "redis" in body["broker"]["transport"].lower()

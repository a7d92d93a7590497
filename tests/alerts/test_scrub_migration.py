"""Migration 0003 cuts webhook secrets out of the errors recorded before deliveries were shown
to viewers, and leaves everything else as it was."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps

from alerts.models import AlertKind, Delivery, Subscription

pytestmark = pytest.mark.django_db
migration = importlib.import_module("alerts.migrations.0003_scrub_recorded_webhook_secrets")
URL = "https://chat.example.org/hooks/s3cr3tT0ken"


def test_recorded_webhook_errors_lose_the_secret_and_nothing_else():
    subscription = Subscription.objects.create(name="ops", webhook_url=URL, email="ops@example.org")
    # As requests words them: the whole URL, or the path after "with url:".
    errors = [
        f"HTTPError: 404 Client Error: Not Found for url: {URL}",
        "ConnectionError: HTTPSConnectionPool(host='chat.example.org', port=443): Max retries exceeded "
        "with url: /hooks/s3cr3tT0ken (Caused by NewConnectionError('refused'))",
        # A URL the subscription no longer has (edited since): cut by its shape.
        "HTTPError: 500 Server Error for url: https://old.example.org/hooks/0ldS3cret",
    ]
    recorded = [
        Delivery.objects.create(
            subscription=subscription,
            kind=AlertKind.REGRESSION,
            subject="s",
            body="b",
            state="failed",
            outcome={"email": "ok", "webhook": error},
        )
        for error in errors
    ]
    sent = Delivery.objects.create(subscription=subscription, kind=AlertKind.TEST, subject="s", body="b",
                                   state="sent", outcome={"email": "ok", "webhook": "ok"})  # fmt: skip
    migration.scrub(apps, None)
    after = [Delivery.objects.get(pk=d.pk).outcome for d in recorded]
    assert [o["webhook"] for o in after] == [
        "HTTPError: 404 Client Error: Not Found for url: https://chat.example.org/…",
        "ConnectionError: HTTPSConnectionPool(host='chat.example.org', port=443): Max retries exceeded "
        "with url: /… (Caused by NewConnectionError('refused'))",
        "HTTPError: 500 Server Error for url: https://old.example.org/…",
    ]
    assert all(o["email"] == "ok" for o in after)
    assert Delivery.objects.get(pk=sent.pk).outcome == {"email": "ok", "webhook": "ok"}

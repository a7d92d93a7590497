"""Where the alerts of these tests land: a real SMTP server and a real webhook server on loopback."""

from __future__ import annotations

import pytest

from tests.support.alert_servers import smtp_server, webhook_server


@pytest.fixture
def mailbox(settings):
    with smtp_server() as server:
        settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
        settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", server.port
        settings.STORAGEOPS_BASE_URL = "https://storageops.example.org"
        yield server


@pytest.fixture
def webhook():
    with webhook_server() as hook:
        yield hook.url, hook.received

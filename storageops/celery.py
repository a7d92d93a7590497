"""The Celery application shared by the web, the workers, beat and the host collectors."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "storageops.settings")

app = Celery("storageops")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# A worker that loses its broker reconnects instead of exiting (storageops.celery_consumer).
app.conf.worker_consumer = "storageops.celery_consumer:SturdyConsumer"

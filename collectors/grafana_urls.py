"""Grafana's JSON-datasource annotations, under /api/v1/grafana/ (included by storageops.urls)."""

from django.contrib.auth.decorators import login_not_required
from django.urls import path

from collectors.api_grafana import GrafanaAnnotations

# DRF answers 401/403 itself: no login redirect for machine clients.
urlpatterns = [path("annotations", login_not_required(GrafanaAnnotations.as_view()), name="grafana_annotations")]

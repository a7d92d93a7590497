"""One router for the whole API under /api/v1/, plus the schema and its docs page."""

from __future__ import annotations

from csp.decorators import csp_update
from django.contrib.auth.decorators import login_not_required
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerSplitView
from rest_framework.routers import DefaultRouter

from alerts import api as alerts
from campaigns.api import views as campaigns
from collectors.api import views as collectors

router = DefaultRouter()
router.register("backends", campaigns.BackendViewSet)
router.register("endpoints", campaigns.EndpointViewSet)
router.register("campaigns", campaigns.CampaignViewSet)
router.register("schedules", campaigns.CampaignScheduleViewSet)
router.register("fts-instances", campaigns.FtsInstanceViewSet)
router.register("runs", campaigns.RunViewSet)
router.register("readiness-checks", campaigns.ReadinessCheckViewSet)
router.register("transfers", campaigns.TransferViewSet)
router.register("hosts", collectors.HostViewSet)
router.register("host-tests", collectors.HostTestSeriesViewSet)
router.register("events", collectors.EventViewSet)
router.register("samples", collectors.MetricSampleViewSet)
router.register("alert-subscriptions", alerts.SubscriptionViewSet)
router.register("alert-deliveries", alerts.DeliveryViewSet)


def _public(view):
    # The API authenticates itself (401/403 in JSON): no login redirect.
    return login_not_required(view)


for pattern in router.urls:
    _public(pattern.callback)

_inline_styles = csp_update({"style-src": ["'unsafe-inline'"], "worker-src": ["'self'", "blob:"]})

urlpatterns = [
    path("v1/compare/", _public(campaigns.ComparisonView.as_view()), name="compare"),
    path("v1/", include(router.urls)),
    path("schema/", _public(SpectacularAPIView.as_view()), name="schema"),
    # The split view serves its start-up script as a file, so the Content-Security-Policy needs
    # no inline script; the templates load Swagger UI and ReDoc from the sidecar's static files.
    path(
        "docs/",
        _public(SpectacularSwaggerSplitView.as_view(url_name="schema", template_name="api/swagger_ui.html")),
        name="api-docs",
    ),
    # ReDoc builds its styles as <style> elements at run time (styled-components): its page
    # alone allows inline styles, and its search worker made from a blob; scripts stay 'self'.
    path(
        "redoc/",
        _public(_inline_styles(SpectacularRedocView.as_view(url_name="schema", template_name="api/redoc.html"))),
        name="api-redoc",
    ),
]

"""One router for the whole API under /api/v1/, plus the schema and its docs page."""

from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.routers import DefaultRouter

from campaigns.api import views as campaigns
from collectors.api import views as collectors

router = DefaultRouter()
router.register("backends", campaigns.BackendViewSet)
router.register("endpoints", campaigns.EndpointViewSet)
router.register("campaigns", campaigns.CampaignViewSet)
router.register("schedules", campaigns.CampaignScheduleViewSet)
router.register("fts-instances", campaigns.FtsInstanceViewSet)
router.register("runs", campaigns.RunViewSet)
router.register("transfers", campaigns.TransferViewSet)
router.register("hosts", collectors.HostViewSet)
router.register("events", collectors.EventViewSet)
router.register("samples", collectors.MetricSampleViewSet)


def _public(view):
    # The API authenticates itself (401/403 in JSON): no login redirect.
    return login_not_required(view)


for pattern in router.urls:
    _public(pattern.callback)

urlpatterns = [
    path("v1/compare/", _public(campaigns.ComparisonView.as_view()), name="compare"),
    path("v1/", include(router.urls)),
    path("schema/", _public(SpectacularAPIView.as_view()), name="schema"),
    path("docs/", _public(SpectacularSwaggerView.as_view(url_name="schema")), name="api-docs"),
]

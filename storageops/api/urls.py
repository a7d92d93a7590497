"""One router for the whole API under /api/v1/, plus the schema and its docs page."""

from __future__ import annotations

from csp.decorators import csp_update
from django.contrib.auth.decorators import login_not_required
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerSplitView
from rest_framework.routers import DefaultRouter

from storageops.api import routes

# The apps registered their viewsets in their AppConfig.ready() (storageops.api.routes).
router = DefaultRouter()
for prefix, viewset in routes.viewsets():
    router.register(prefix, viewset)


def _public(view):
    # The API authenticates itself (401/403 in JSON): no login redirect.
    return login_not_required(view)


for pattern in router.urls:
    _public(pattern.callback)

_inline_styles = csp_update({"style-src": ["'unsafe-inline'"], "worker-src": ["'self'", "blob:"]})

urlpatterns = [
    *(path(f"v1/{route}", _public(view.as_view()), name=name) for route, view, name in routes.views()),
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

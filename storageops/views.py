"""Framework-level views: the health probe (the home page is the campaigns app's)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from storageops.health import health


@login_not_required
@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    ok, report = health()
    return JsonResponse(report, status=200 if ok else 503)

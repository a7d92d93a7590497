"""Framework-level views: the dashboard home and the health probe."""

from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from storageops import dashboard
from storageops.health import health


@login_not_required
@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    ok, report = health()
    return JsonResponse(report, status=200 if ok else 503)


def home(request: HttpRequest) -> HttpResponse:
    return render(request, "home.html", dashboard.home_context())

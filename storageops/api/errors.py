"""Django's own 404 and 500 pages, in the API's error shape for paths under /api/.

A malformed id (``/api/v1/runs/0.5/``) never reaches DRF: the URL resolver refuses it and Django
answers with an HTML page. API clients are promised one JSON error shape for every failure,
so those answers are rewritten here; browser pages keep Django's templates.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def _error(status: int, message: str) -> JsonResponse:
    return JsonResponse({"error": {"status": status, "message": message, "fields": {}}}, status=status)


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if _is_api(request):
        return _error(404, "Not found.")
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    if _is_api(request):
        return _error(500, "Internal server error; the traceback is in the server's log.")
    return defaults.server_error(request)

"""Django's own error answers, in the API's error shape for paths under /api/.

A malformed id (``/api/v1/runs/0.5/``) never reaches DRF: the URL resolver refuses it and Django
answers with an HTML page. API clients are promised one JSON error shape for every failure,
so those answers are rewritten here; browser pages keep Django's templates (or ours, for the
no-role 403 and the outage 503).
"""

from __future__ import annotations

import sys

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.views import defaults

from storageops.oidc.hints import groups_hint
from storageops.outage import is_outage

# Seconds a client is asked to wait when the database or the broker does not answer: long
# enough not to hammer a restarting PostgreSQL, short enough for a failover.
RETRY_AFTER_SECONDS = 30


def is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def wants_json(request: HttpRequest) -> bool:
    # The chart documents of the pages (…/charts/x.json, metrics.json) are read by scripts.
    return is_api(request) or request.path.endswith(".json")


def error_response(status: int, message: str, fields: dict | None = None) -> JsonResponse:
    return JsonResponse({"error": {"status": status, "message": message, "fields": fields or {}}}, status=status)


def unavailable(request: HttpRequest, what: str = "database") -> HttpResponse:
    """503 for an outage of the database or the broker: a client's retry will work, a 500 would
    blame the code. No request data is touched (the session lives in the database)."""
    message = f"The {what} does not answer; try again in a minute."
    if wants_json(request):
        response: HttpResponse = error_response(503, message)
    else:
        # Rendered without the request: the context processors would read the session.
        html = render_to_string("503.html", {"message": message, "retry_after": RETRY_AFTER_SECONDS})
        response = HttpResponse(html, status=503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api(request):
        return error_response(404, "Not found.")
    return defaults.page_not_found(request, exception)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api(request):
        return error_response(400, "The request could not be read.")
    return defaults.bad_request(request, exception)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    if wants_json(request):
        return error_response(403, "Your role does not allow this.")
    html = render_to_string("403.html", {"exception": exception, "groups_hint": groups_hint(request)}, request=request)
    return HttpResponse(html, status=403)


def server_error(request: HttpRequest) -> HttpResponse:
    # Django calls this inside its `except` block: an outage that escaped every view-level
    # handler (a session written back after the view) still answers 503, not 500.
    exc = sys.exc_info()[1]
    if exc is not None and (what := is_outage(exc)):
        return unavailable(request, what)
    if is_api(request):
        return error_response(500, "Internal server error; the traceback is in the server's log.")
    return defaults.server_error(request)

"""A request larger than STORAGEOPS_MAX_REQUEST_BYTES is refused (413) before its body is read.

Django alone turns an oversized body into a 400 HTML page when a view first reads it (and
only for form data and request.body, not for file parts); refusing by Content-Length here
gives every route one answer, in the API's JSON error shape under /api/.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from storageops.api.errors import error_response, is_api


class RequestSizeLimitMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit = settings.STORAGEOPS_MAX_REQUEST_BYTES
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = -1
        if length < 0 or length > limit:
            status, message = (
                (400, "The Content-Length header is not a number.")
                if length < 0
                else (413, f"The request body is {length:,} bytes; at most {limit:,} are accepted.")
            )
            if is_api(request):
                return error_response(status, message)
            return HttpResponse(message, status=status, content_type="text/plain; charset=utf-8")
        return self.get_response(request)

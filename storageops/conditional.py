"""Conditional answers: an ETag of the body, and 304 Not Modified to a viewer who has it already.

Used by the views every open page polls (a live run's progress partial and chart documents): the
body is the one shared by all viewers of the moment (campaigns.web.live_snapshot), so its tag is
the same for all, and a poll whose answer has not changed costs no body on the wire. The role is
checked before any view runs (storageops.access), so a 304 is only ever said to someone allowed
to see the body. "private, no-cache": a browser keeps the answer and asks again every time
(its fetch and htmx then see the kept body); a shared cache in between keeps nothing.
"""

from __future__ import annotations

import hashlib

from django.http import HttpRequest, HttpResponse, HttpResponseNotModified
from django.utils.cache import parse_etags


def etag_of(body: bytes) -> str:
    return '"' + hashlib.blake2b(body, digest_size=16).hexdigest() + '"'


def answer(request: HttpRequest, body: bytes, content_type: str, etag: str | None = None) -> HttpResponse:
    """The body with its ETag, or 304 when the request's If-None-Match names it."""
    etag = etag or etag_of(body)
    held = parse_etags(request.headers.get("If-None-Match", ""))
    fresh = etag in held or "*" in held
    response = HttpResponseNotModified() if fresh else HttpResponse(body, content_type=content_type)
    response["ETag"] = etag
    response["Cache-Control"] = "private, no-cache"
    return response

"""The site's Content-Security-Policy header, built once (storageops.csp_header): every response
carries what django-csp's own middleware would have given it, whatever the settings, a view's
own changes and a nonce asked for."""

from __future__ import annotations

import gc

import pytest
from csp.constants import HEADER, HEADER_REPORT_ONLY, NONCE
from csp.decorators import csp_exempt, csp_replace, csp_update
from csp.exceptions import CSPNonceError
from csp.middleware import CSPMiddleware
from django.http import HttpResponse
from django.test import RequestFactory
from XRootD.client import File

from storageops.csp_header import SitePolicyCSPMiddleware

POLICY = {"DIRECTIVES": {"default-src": ["'self'"], "script-src": ["'self'", NONCE], "img-src": ["'self'", "data:"]}}


def _plain(request):
    return HttpResponse("plain")


def _own_header(request):
    response = HttpResponse("own")
    response[HEADER] = "default-src 'none'"
    return response


def _uses_nonce(request):
    return HttpResponse(f"<script nonce='{request.csp_nonce}'></script>")


VIEWS = {
    "plain": _plain,
    "own header": _own_header,
    "updated": csp_update({"img-src": ["blob:"]})(_plain),
    "replaced": csp_replace({"img-src": ["https://cdn.example"]})(_plain),
    "exempt": csp_exempt()(_plain),
    "nonce": _uses_nonce,
}


def _answer(middleware_class, view, path: str = "/campaigns/"):
    request = RequestFactory().get(path)
    middleware = middleware_class(view)
    return request, middleware(request)


def _headers(request, response) -> dict:
    """Both headers, the request's own nonce (random) written as NONCE."""
    nonce = getattr(request, "_csp_nonce", None)
    return {
        name: (value.replace(nonce, "NONCE") if nonce and value else value)
        for name in (HEADER, HEADER_REPORT_ONLY)
        for value in [response.get(name)]
    }


def _directives(header: str) -> dict[str, str]:
    """A policy by directive: django-csp joins them in no fixed order."""
    return dict(part.strip().split(" ", 1) for part in header.split(";"))


@pytest.mark.parametrize(
    "policies",
    [
        {"CONTENT_SECURITY_POLICY": POLICY},
        {"CONTENT_SECURITY_POLICY_REPORT_ONLY": POLICY},
        {"CONTENT_SECURITY_POLICY": POLICY, "CONTENT_SECURITY_POLICY_REPORT_ONLY": POLICY},
        {"CONTENT_SECURITY_POLICY": {**POLICY, "EXCLUDE_URL_PREFIXES": ["/campaigns/"]}},
    ],
    ids=["enforced", "report-only", "both", "excluded-prefix"],
)
@pytest.mark.parametrize("view", list(VIEWS))
def test_every_response_carries_what_django_csp_would_give_it(settings, policies, view):
    settings.CONTENT_SECURITY_POLICY = None
    settings.CONTENT_SECURITY_POLICY_REPORT_ONLY = None
    for name, value in policies.items():
        setattr(settings, name, value)
    their_request, theirs = _answer(CSPMiddleware, VIEWS[view])
    our_request, ours = _answer(SitePolicyCSPMiddleware, VIEWS[view])
    assert _headers(our_request, ours) == _headers(their_request, theirs)
    if view == "nonce" and "EXCLUDE_URL_PREFIXES" not in str(policies):
        assert "'nonce-" in (ours.get(HEADER) or ours.get(HEADER_REPORT_ONLY))


def test_a_changed_policy_is_built_again(settings):
    settings.CONTENT_SECURITY_POLICY = POLICY
    _, first = _answer(SitePolicyCSPMiddleware, _plain)
    settings.CONTENT_SECURITY_POLICY = {"DIRECTIVES": {"default-src": ["'none'"]}}
    _, second = _answer(SitePolicyCSPMiddleware, _plain)
    assert _directives(first[HEADER]) == {"default-src": "'self'", "script-src": "'self'", "img-src": "'self' data:"}
    assert second[HEADER] == "default-src 'none'"


@pytest.mark.parametrize("view", ["plain", "updated"])  # our own path, and django-csp's
def test_a_nonce_asked_for_after_the_header_is_written_is_refused(settings, view):
    settings.CONTENT_SECURITY_POLICY = POLICY
    request, _ = _answer(SitePolicyCSPMiddleware, VIEWS[view])
    with pytest.raises(CSPNonceError):
        str(request.csp_nonce)
    with pytest.raises(CSPNonceError):
        f"{request.csp_nonce}"
    assert not request.csp_nonce


def test_a_request_kept_alive_does_not_stop_what_walks_every_object_at_exit(settings):
    """XRootD's client closes its open files at exit by calling isinstance on every live object
    (XRootD/client/finalize.py); django-csp's placeholder raised there and stopped the loop."""
    settings.CONTENT_SECURITY_POLICY = POLICY
    kept = [_answer(SitePolicyCSPMiddleware, VIEWS[view])[0] for view in ("plain", "updated")]
    assert all(not isinstance(request.csp_nonce, str) for request in kept)
    walked = sum(1 for obj in gc.get_objects() if isinstance(obj, File))
    assert walked == 0


def test_the_site_pages_carry_the_site_policy(client, operator):
    """Through the whole stack, as configured: a page and the API schema's page (csp_update)."""
    client.force_login(operator)
    page = client.get("/campaigns/")
    assert page.status_code == 200
    site = _directives(page[HEADER])
    assert site["script-src"] == site["style-src"] == "'self'" and site["frame-ancestors"] == "'none'"
    docs = client.get("/api/redoc/")
    assert _directives(docs[HEADER])["style-src"] == "'self' 'unsafe-inline'"

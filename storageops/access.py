"""Roles on every page: the pages and their JSON follow the API's rules (storageops.roles).

Django's LoginRequiredMiddleware sends an anonymous visitor to the login page; this subclass
also refuses a signed-in user who holds no role (403, "ask an admin for a role"), so that
every page and chart document needs at least viewer, as the API does. Actions check their
own permission (operator: start/cancel/log; admin: configuration) with permission_required.

Views marked @login_not_required are left alone: the login page, /healthz, /metrics (its own
token) and the API, whose DRF permissions answer in JSON. The admin keeps its own rules
(is_staff and each model's permissions).

The first database access of a page request happens here (the session, the user's groups),
so an outage of PostgreSQL is answered here as a 503 rather than as a 500 with a traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.contrib.auth.middleware import LoginRequiredMiddleware
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string

from storageops.api import tokens
from storageops.api.errors import error_response, unavailable, wants_json
from storageops.oidc.hints import groups_hint
from storageops.outage import is_outage

logger = logging.getLogger(__name__)


def role_not_required(view: Callable) -> Callable:
    """For pages a signed-in user without a role must still reach (logging out)."""
    view.role_required = False
    return view


def no_role(request: HttpRequest) -> HttpResponse:
    hint = groups_hint(request)
    message = (
        f"Your account has no role yet. {hint}"
        if hint
        else "Your account has no role yet: ask an admin to give you one (viewer, operator or admin)."
    )
    if wants_json(request):
        return error_response(403, message)
    html = render_to_string("403_no_role.html", {"message": message}, request=request)
    return HttpResponse(html, status=403)


class RoleRequiredMiddleware(LoginRequiredMiddleware):
    def process_view(self, request, view_func, view_args, view_kwargs):
        if not getattr(view_func, "login_required", True):
            return None
        match = request.resolver_match
        try:
            if not request.user.is_authenticated:
                return self.handle_no_permission(request, view_func)
            if match and match.namespace == "admin":
                return None
            if getattr(view_func, "role_required", True) and tokens.user_role(request.user) is None:
                return no_role(request)
        except Exception as exc:
            if what := is_outage(exc):
                logger.warning("%s %s: the %s does not answer (%s)", request.method, request.path, what, exc)
                return unavailable(request, what)
            raise
        return None

    def process_exception(self, request, exception):
        # A page's view that met an outage (DRF views answer for themselves, in JSON).
        if what := is_outage(exception):
            logger.warning("%s %s: the %s does not answer (%s)", request.method, request.path, what, exception)
            return unavailable(request, what)
        return None

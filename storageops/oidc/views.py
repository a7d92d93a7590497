"""The sign-in pages: the login page (provider button beside or instead of the local form), the
hand-off to the provider, its callback, and sign-out (here and at the provider).

The local form always accepts a POST: it is the break-glass way in when the provider is down.
"""

from __future__ import annotations

import logging
from urllib.parse import urlencode

import requests
from django.contrib import auth
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.decorators import method_decorator
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST
from django.views.generic import View
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from storageops.oidc import discovery
from storageops.oidc.backend import provider_setting
from storageops.oidc.config import SESSION_ID_TOKEN, SESSION_ISSUER

logger = logging.getLogger(__name__)

# ?sso=<code> on the login page: what went wrong on the way through the provider.
MESSAGES = {
    "unavailable": "{name} does not answer right now, so signing in through it is not possible. "
    "Try again in a few minutes; an administrator can still log in with a local account below.",
    "failed": "Signing in through {name} did not complete (cancelled, refused, or it took too long). Try again.",
}


def _login_url(code: str) -> str:
    return f"{reverse('login')}?{urlencode({'sso': code})}"


@method_decorator(never_cache, name="dispatch")
class LoginPage(auth_views.LoginView):
    """Django's login view, plus the provider's button and what is known about the provider."""

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        cfg = discovery.config()
        if cfg is None:
            return context
        code = self.request.GET.get("sso", "")
        down = discovery.last_failure(cfg)
        if down and code != "unavailable":
            code = "unavailable"
        next_url = self.get_redirect_url()
        context["sso"] = {
            "name": cfg.provider_name,
            "url": reverse("oidc_sign_in") + (f"?{urlencode({'next': next_url})}" if next_url else ""),
            "message": MESSAGES[code].format(name=cfg.provider_name) if code in MESSAGES else "",
            "down": code == "unavailable",
            # STORAGEOPS_OIDC_ONLY hides the form, except after ?local=1 or when the provider is down.
            "show_local": not cfg.only or bool(self.request.GET.get("local")) or code == "unavailable",
        }
        return context


class SignIn(OIDCAuthenticationRequestView):
    """Off to the provider, after asking it for its metadata afresh: a provider that is down
    gives our login page with a message, not the browser's connection error."""

    get_settings = staticmethod(provider_setting)

    def __init__(self, **kwargs) -> None:
        # The parent reads the provider's endpoints here, before dispatch could catch a provider
        # that is down: read them when the redirect is built instead.
        View.__init__(self, **kwargs)

    @property
    def OIDC_OP_AUTH_ENDPOINT(self) -> str:
        return provider_setting("OIDC_OP_AUTHORIZATION_ENDPOINT")

    @property
    def OIDC_RP_CLIENT_ID(self) -> str:
        return provider_setting("OIDC_RP_CLIENT_ID")

    def dispatch(self, request, *args, **kwargs):
        cfg = discovery.config()
        if cfg is None:
            raise Http404("single sign-on is not configured")
        try:
            discovery.metadata(cfg, fresh=True)
        except discovery.ProviderUnavailable as exc:
            logger.warning("sign-in: %s does not answer (%s)", cfg.issuer, exc)
            return HttpResponseRedirect(_login_url("unavailable"))
        return super().dispatch(request, *args, **kwargs)


class Callback(OIDCAuthenticationCallbackView):
    get_settings = staticmethod(provider_setting)

    def dispatch(self, request, *args, **kwargs):
        if discovery.config() is None:
            raise Http404("single sign-on is not configured")
        try:
            return super().dispatch(request, *args, **kwargs)
        except (requests.HTTPError, SuspiciousOperation) as exc:
            # The provider answered, but no: a stale or replayed code, a token we refuse.
            logger.warning("sign-in callback refused: %s", exc)
            return self.login_failure()
        except (discovery.ProviderUnavailable, requests.RequestException) as exc:
            logger.warning("sign-in callback: the provider does not answer (%s)", exc)
            return HttpResponseRedirect(_login_url("unavailable"))

    def login_failure(self):
        return HttpResponseRedirect(_login_url("failed"))

    def login_success(self):
        response = super().login_success()
        seconds = getattr(self.request, "oidc_session_seconds", None)
        if seconds:
            self.request.session.set_expiry(seconds)
        return response


def _end_session_url(request: HttpRequest, id_token: str) -> str | None:
    cfg = discovery.config()
    if cfg is None or not id_token:
        return None
    try:
        endpoint = discovery.metadata(cfg).get("end_session_endpoint")
    except discovery.ProviderUnavailable:
        return None
    if not endpoint:
        return None
    query = {
        "id_token_hint": id_token,
        "client_id": cfg.client_id,
        # Registered at the provider as a post-logout redirect URI (docs/security.md).
        "post_logout_redirect_uri": request.build_absolute_uri(reverse("login")),
    }
    return f"{endpoint}{'&' if '?' in endpoint else '?'}{urlencode(query)}"


@require_POST
def sign_out(request: HttpRequest) -> HttpResponse:
    """Sign out here; a provider session ends too when the provider offers an end-session endpoint."""
    id_token = request.session.get(SESSION_ID_TOKEN, "") if request.session.get(SESSION_ISSUER) else ""
    auth.logout(request)
    end_session_url = _end_session_url(request, id_token)
    if end_session_url is None:
        return HttpResponseRedirect(reverse("login"))
    context = {"end_session_url": end_session_url, "provider_name": discovery.config().provider_name}
    return render(request, "registration/signed_out_sso.html", context)


sign_in = login_not_required(SignIn.as_view())
callback = login_not_required(Callback.as_view())

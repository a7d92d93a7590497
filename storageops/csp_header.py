"""The Content-Security-Policy header, built once for the responses that all carry the same one.

django-csp builds the policy for every response: it copies the settings' directives
(``dataclasses.asdict`` deep-copies them) and joins them into the header, twice (the enforced
policy and the report-only one). Every page and API answer here carries the site's policy
unchanged, so that work is done once per process and its result reused. A response that changes
its policy (``csp_update``, ``csp_replace``, ``csp_exempt``: the API's schema views) or a request
that used a nonce goes through django-csp's own code, as before.
"""

from __future__ import annotations

from csp.constants import HEADER, HEADER_REPORT_ONLY
from csp.exceptions import CSPNonceError
from csp.middleware import CSPMiddleware
from csp.utils import build_policy
from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.http import HttpRequest
from django.http.response import HttpResponseBase

#: The response attributes through which a view changes its policy (csp.decorators).
_PER_RESPONSE = (
    "_csp_config", "_csp_update", "_csp_replace", "_csp_exempt",
    "_csp_config_ro", "_csp_update_ro", "_csp_replace_ro", "_csp_exempt_ro",
)  # fmt: skip

_built: dict[str, str] | None = None


def site_headers() -> dict[str, str]:
    """The headers every unchanged response carries: {header name: policy}, without empty ones."""
    global _built
    if _built is None:
        built = {HEADER: build_policy(), HEADER_REPORT_ONLY: build_policy(report_only=True)}
        _built = {name: policy for name, policy in built.items() if policy}
    return _built


@receiver(setting_changed)
def _forget(setting: str, **kwargs) -> None:
    # Tests change the policy with override_settings; a site changes it by restarting.
    global _built
    if setting.startswith("CONTENT_SECURITY_POLICY"):
        _built = None


class NonceAfterHeader:
    """What ``request.csp_nonce`` is once the header is written. Its value is refused, as by
    django-csp's own placeholder, but it is a plain object: django-csp's is a lazy object whose
    ``__class__`` raises, and XRootD's client, at exit, calls ``isinstance`` on every live object
    to close its open files. A request still referenced then (a test's) stopped that loop with
    CSPNonceError, leaving the files it had not reached open."""

    __slots__ = ()

    def __bool__(self) -> bool:
        return False  # as django-csp's: no nonce was made

    def __str__(self) -> str:
        raise CSPNonceError(
            "The 'csp_nonce' attribute is not available after the CSP header has been written. "
            "Consider adjusting your MIDDLEWARE order."
        )

    def __format__(self, spec: str) -> str:
        return str(self)  # f"{nonce}" is refused like str()


AFTER_HEADER = NonceAfterHeader()


class SitePolicyCSPMiddleware(CSPMiddleware):
    """django-csp's middleware, with the site's unchanged policy built once (module docstring)."""

    def process_response(self, request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
        changed = any(hasattr(response, attribute) for attribute in _PER_RESPONSE)
        if changed or settings.DEBUG or getattr(request, "_csp_nonce", None) is not None:
            response = super().process_response(request, response)
            if getattr(request, "_csp_nonce", None) is None:
                request.csp_nonce = AFTER_HEADER
            return response
        # What django-csp does for such a response, with the policy already built: its header
        # set unless the view set one itself, and EXCLUDE_URL_PREFIXES honoured.
        for name, policy in site_headers().items():
            setting = "CONTENT_SECURITY_POLICY" if name == HEADER else "CONTENT_SECURITY_POLICY_REPORT_ONLY"
            prefixes = (getattr(settings, setting, None) or {}).get("EXCLUDE_URL_PREFIXES") or ()
            if name not in response and not request.path_info.startswith(tuple(prefixes)):
                response[name] = policy
        # After the header is written a nonce can no longer be had (django-csp's own behaviour).
        request.csp_nonce = AFTER_HEADER
        return response

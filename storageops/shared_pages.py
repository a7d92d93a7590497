"""A page rendered once for every viewer of one role, the few per-request bits put in after.

When a data challenge starts, hundreds of people open the same run page within a second; each
rendering of it (the run's context, the verdict, the template of the whole page) costs the site
milliseconds of CPU it needs for their polls. What differs between two viewers of such a page is
small and known: the CSRF token (per session), the name in the navigation bar, and what their
role lets them do (the Cancel, Retry and baseline forms). So a page is rendered with placeholders
for the first two, once per role (the permissions its templates test, and staff for the Admin
link), and each viewer gets a copy with their own token and name put in.

A request with messages waiting (the page a POST redirected to) is rendered for itself: the
messages are its own. The caller decides how long a rendering is shared (campaigns.web.live_snapshot
shares a live run's views for the clock's second).
"""

from __future__ import annotations

from collections.abc import Iterable
from types import SimpleNamespace

from django.contrib import messages
from django.http import HttpRequest
from django.middleware.csrf import get_token
from django.utils.html import escape

# Unlikely in any page, and unchanged by HTML escaping (letters, digits and hyphens only).
CSRF_PLACEHOLDER = "storageops-shared-page-csrf-9d1f3b7e"
USER_PLACEHOLDER = "storageops-shared-page-user-9d1f3b7e"


def role_key(request: HttpRequest, permissions: Iterable[str]) -> str:
    """What of the viewer a shared rendering may depend on: each permission's yes or no, and staff."""
    user = request.user
    return "".join("1" if user.has_perm(p) else "0" for p in permissions) + ("s" if user.is_staff else "")


def has_own_messages(request: HttpRequest) -> bool:
    """Messages are waiting for this request (read without marking them shown)."""
    return len(messages.get_messages(request)) > 0


def placeholder_context(request: HttpRequest) -> dict:
    """Context entries that make a rendering the same for every viewer of the caller's role:
    the CSRF token and the user's name as placeholders (the role itself stays the caller's)."""
    user = request.user
    stand_in = SimpleNamespace(
        is_authenticated=user.is_authenticated,
        is_staff=user.is_staff,
        get_username=lambda: USER_PLACEHOLDER,
    )
    return {"csrf_token": CSRF_PLACEHOLDER, "user": stand_in}


def personalise(html: str, request: HttpRequest) -> str:
    """A shared rendering with this viewer's CSRF token and name (get_token also sets the cookie)."""
    return html.replace(CSRF_PLACEHOLDER, get_token(request)).replace(
        USER_PLACEHOLDER, escape(request.user.get_username())
    )

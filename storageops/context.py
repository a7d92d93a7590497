"""Who or what is changing things right now: a request, a task, or a command.

Set by the middleware for requests and by `acting_as` elsewhere; read by the change
log's signal receivers, so no view or service has to pass "who" around by hand.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(frozen=True)
class ChangeContext:
    user: object | None = None
    via: str = "command"  # web, api, task, command
    request_id: str = ""


_current: ContextVar[ChangeContext | None] = ContextVar("storageops_change_context", default=None)


def current() -> ChangeContext:
    return _current.get() or ChangeContext()


@contextlib.contextmanager
def acting_as(user=None, via: str = "command", request_id: str = "") -> Iterator[ChangeContext]:
    context = ChangeContext(user=user, via=via, request_id=request_id or uuid.uuid4().hex)
    token = _current.set(context)
    try:
        yield context
    finally:
        _current.reset(token)


class ChangeContextMiddleware:
    """Every request runs inside a change context: its user, 'api' or 'web', a request id."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        via = "api" if request.path.startswith("/api/") else "web"
        request_id = request.headers.get("X-Request-ID", "")[:64] or uuid.uuid4().hex
        # The user of an API token is known only after DRF authenticates: read it lazily.
        with acting_as(user=_LazyUser(request), via=via, request_id=request_id):
            response = self.get_response(request)
        response["X-Request-ID"] = request_id
        return response


class _LazyUser:
    """The request's user as DRF or the session finally sees it."""

    def __init__(self, request) -> None:
        self.request = request

    def resolve(self):
        user = getattr(self.request, "user", None)
        return user if user is not None and user.is_authenticated else None

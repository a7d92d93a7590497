"""The one way events enter the change & restart log, whatever their source."""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone

from collectors.models import Event


def log_event(
    kind: str,
    summary: str,
    *,
    source: str = "storageops",
    time: datetime | None = None,
    host=None,
    backend=None,
    endpoint=None,
    run=None,
    user=None,
    who: str = "",
    detail: str = "",
) -> Event:
    if user is not None and not who:
        who = user.get_username()
    return Event.objects.create(
        kind=kind,
        summary=summary[:300],
        source=source,
        time=time or timezone.now(),
        host=host,
        backend=backend,
        endpoint=endpoint,
        run=run,
        user=user,
        who=who,
        detail=detail,
    )

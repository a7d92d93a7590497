"""The one way events enter the change & restart log, whatever their source.

The backend, endpoint and run an event is about are stored by id (collectors.references):
pass the objects, as always, or their ids.
"""

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
        backend_id=_id(backend),
        endpoint_id=_id(endpoint),
        run_id=_id(run),
        user=user,
        who=who,
        detail=detail,
    )


def _id(obj) -> int | None:
    return obj if obj is None or isinstance(obj, int) else obj.pk

"""What the storage did to the copies, on the event log once per episode: a full disk, a door
that does not answer, a door that refuses.

Each copy that fails says why (its category), on its own row; an operator reading the event log
saw nothing, or, had each failure been logged, a cascade of copy errors. A soak (issue 48) fills
a door's disk and hangs a door: each should read there as what it was, once. So the failures of
these categories are grouped by the door they point at (the destination for a full disk, the
pair for a deadline or a refusal: a hung source stalls the destination's pull as much) and an
episode is one event, whatever the number of runs and copies it hit: a failure within
EPISODE_GAP of the episode's last one extends it (its count, its end, in the detail), a later
one starts another.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from django.db import transaction
from django.utils import timezone

from campaigns.choices import ErrorCategory
from campaigns.runs.engines.copies import CopyResult
from collectors.choices import EventKind
from collectors.events import log_event
from collectors.models import Event

EPISODE_GAP = timedelta(seconds=90)
WHAT = {
    ErrorCategory.NO_SPACE: "No space left on {where}",
    ErrorCategory.TRANSFER_TIMEOUT: "Copies ran into their deadline between {where} (a door not answering)",
    ErrorCategory.CONNECTION_REFUSED: "Connections refused between {where} (a door down)",
}


def _door(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _where(result: CopyResult) -> str:
    if result.category == ErrorCategory.NO_SPACE:
        return _door(result.job.destination)
    return f"{_door(result.job.source)} and {_door(result.job.destination)}"


def note_failures(run_id: int, results: Iterable[CopyResult], now: datetime | None = None) -> list[Event]:
    """Put these results' storage faults on the log: a new episode's event, or the open one extended."""
    now = now or timezone.now()
    groups: dict[str, int] = defaultdict(int)
    for result in results:
        if not result.ok and result.category in WHAT:
            groups[WHAT[result.category].format(where=_where(result))] += 1
    return [event for summary, copies in groups.items() if (event := _episode(summary, copies, run_id, now))]


@transaction.atomic
def _episode(summary: str, copies: int, run_id: int, now: datetime) -> Event | None:
    latest = (
        Event.objects.select_for_update()
        .filter(kind=EventKind.RUN_INCIDENT, summary__startswith=summary, run_id=None)
        .order_by("-time")
        .first()
    )
    detail = json.loads(latest.detail) if latest is not None and latest.detail.startswith("{") else None
    if detail is not None and datetime.fromisoformat(detail["end"]) >= now - EPISODE_GAP:
        detail["end"] = max(detail["end"], now.isoformat())
        detail["copies"] += copies
        detail["runs"] = sorted(set(detail["runs"]) | {run_id})
        latest.detail = json.dumps(detail)
        latest.save(update_fields=["detail"])
        return None
    detail = {"start": now.isoformat(), "end": now.isoformat(), "copies": copies, "runs": [run_id]}
    return log_event(EventKind.RUN_INCIDENT, summary, time=now, detail=json.dumps(detail))

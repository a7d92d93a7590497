"""What the storage did to the copies, on the event log once per episode: a full disk, a door
that does not answer, a door that refuses.

Each copy that fails says why (its category), on its own row; an operator reading the event log
saw nothing, or, had each failure been logged, a cascade of copy errors. A soak (issue 48) fills
a door's disk and hangs a door: each should read there as what it was, once. So the failures of
these categories are grouped by the door they point at (the destination for a full disk, the
pair for a deadline or a refusal: a hung source stalls the destination's pull as much) and an
episode is one event, whatever the number of runs and copies it hit: a failure within
EPISODE_GAP of the episode's last one extends it (its count, its end, in the detail), a later
one starts another. A copy that succeeds over the same door (the same pair) ends the episode
there and then ("over" in the detail): the disk had room again, the door answered. A disk filled
again a minute after it was freed is a second episode, not more of the first.
"""

from __future__ import annotations

import json
import threading
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


def _keys_of_success(result: CopyResult) -> list[str]:
    """The episodes a successful copy ends: a full disk at its destination, a hang or refusal of its pair."""
    pair = f"{_door(result.job.source)} and {_door(result.job.destination)}"
    return [
        WHAT[ErrorCategory.NO_SPACE].format(where=_door(result.job.destination)),
        WHAT[ErrorCategory.TRANSFER_TIMEOUT].format(where=pair),
        WHAT[ErrorCategory.CONNECTION_REFUSED].format(where=pair),
    ]


# The episodes this process opened or extended lately: a success is checked against these only,
# so that a run's copies cost no query while nothing is wrong.
_open: dict[str, datetime] = {}
_open_lock = threading.Lock()


def has_open() -> bool:
    """Whether this process has an episode a success could end."""
    return bool(_open)


def note_failures(run_id: int, results: Iterable[CopyResult], now: datetime | None = None) -> list[Event]:
    """Put these results' storage faults on the log (a new episode's event, or the open one
    extended); a success ends the open episode of its door or pair, unless it failed too here."""
    now = now or timezone.now()
    groups: dict[str, int] = defaultdict(int)
    succeeded: set[str] = set()
    for result in results:
        if not result.ok and result.category in WHAT:
            groups[WHAT[result.category].format(where=_where(result))] += 1
        elif result.ok and _open:
            succeeded.update(_keys_of_success(result))
    with _open_lock:
        for summary in [s for s in _open if s in succeeded and s not in groups]:
            _end_episode(summary, now)
            del _open[summary]
        for summary, since in list(_open.items()):
            if since < now - EPISODE_GAP:
                del _open[summary]  # over by time: the next failure starts another anyway
        for summary in groups:
            _open[summary] = now
    return [event for summary, copies in groups.items() if (event := _episode(summary, copies, run_id, now))]


def _latest(summary: str) -> Event | None:
    return (
        Event.objects.select_for_update()
        .filter(kind=EventKind.RUN_INCIDENT, summary__startswith=summary, run_id=None)
        .order_by("-time")
        .first()
    )


def _detail(event: Event | None) -> dict | None:
    return json.loads(event.detail) if event is not None and event.detail.startswith("{") else None


@transaction.atomic
def _end_episode(summary: str, now: datetime) -> None:
    latest = _latest(summary)
    detail = _detail(latest)
    if detail is not None and "over" not in detail:
        detail["over"] = now.isoformat()
        latest.detail = json.dumps(detail)
        latest.save(update_fields=["detail"])


@transaction.atomic
def _episode(summary: str, copies: int, run_id: int, now: datetime) -> Event | None:
    latest = _latest(summary)
    detail = _detail(latest)
    if detail is not None and "over" not in detail and datetime.fromisoformat(detail["end"]) >= now - EPISODE_GAP:
        detail["end"] = max(detail["end"], now.isoformat())
        detail["copies"] += copies
        detail["runs"] = sorted(set(detail["runs"]) | {run_id})
        latest.detail = json.dumps(detail)
        latest.save(update_fields=["detail"])
        return None
    detail = {"start": now.isoformat(), "end": now.isoformat(), "copies": copies, "runs": [run_id]}
    return log_event(EventKind.RUN_INCIDENT, summary, time=now, detail=json.dumps(detail))

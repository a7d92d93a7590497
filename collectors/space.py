"""Free space of a host's data filesystems: sampled every tick, and a filesystem that fills up
logged as one event, given its end and length when room comes back (and lasts).

Copies learn of a full disk only when they write to it (campaigns.runs.storage_faults); a disk
that fills while nothing writes (a hung source, a quiet night) is seen only here. The event
names the host and the path, so it can be found again by a collector started while the
filesystem is still full: that one carries the event on rather than logging a second.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime

from django.db.models import F, Value
from django.db.models.functions import Concat

from collectors.choices import EventKind
from collectors.events import log_event
from collectors.models import Event, Host, MetricSample
from storageops import alerting
from storageops.units import human_bytes

#: Full: less room left than this share of the filesystem, or than FULL_BYTES_CAP on a big one
#: (1 % of a 1-PB pool is 10 TB, not full).
FULL_FRACTION = 0.01
FULL_BYTES_CAP = 1 << 30
#: Room again only at twice the full mark, so a disk hovering at the mark is one event, not many;
#: and only when it lasts: a full disk whose files are deleted and written again has room for a
#: moment, which is not the episode's end.
ROOM_FACTOR = 2
ROOM_SECONDS = 5.0
ENDED = "\nended "


@dataclass(frozen=True)
class Space:
    path: str
    size: int  # bytes
    free: int  # bytes an unprivileged writer (the door's daemon) may still write

    @property
    def full_mark(self) -> int:
        return min(int(self.size * FULL_FRACTION), FULL_BYTES_CAP)

    @property
    def full(self) -> bool:
        return self.size > 0 and self.free < self.full_mark

    @property
    def roomy(self) -> bool:
        return self.free >= ROOM_FACTOR * self.full_mark


def space(path: str) -> Space | None:
    """The filesystem holding ``path``; None when it cannot be read (missing, unmounted)."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return Space(path, st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize)


def _prefix(host: Host, path: str) -> str:
    return f"No space left on {host.name}:{path}"


@dataclass
class _Full:
    event: int
    since: datetime
    least: int  # the least free space seen while full
    room_since: datetime | None = None  # room seen since (not yet long enough to end it)


class SpaceWatch:
    """Samples each watched filesystem and logs when it fills up and when room comes back."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self._full: dict[str, _Full] = {}
        self._looked: set[str] = set()

    def check(self, now: datetime) -> list[MetricSample]:
        samples = []
        for path in self.host.watched_filesystems or ():
            current = space(path)
            if current is None:
                continue
            label = path[:64]
            samples += [
                MetricSample(host=self.host, metric="fs.free_bytes", label=label, time=now, value=current.free),
                MetricSample(host=self.host, metric="fs.size_bytes", label=label, time=now, value=current.size),
            ]
            if path not in self._looked:
                self._looked.add(path)
                self._adopt(path, current, now)
            self._check(current, now)
        return samples

    def _adopt(self, path: str, current: Space, now: datetime) -> None:
        """Carry on an event a previous collector left open for this path (it died, or was
        stopped while the disk was full)."""
        open_event = (
            Event.objects.filter(host=self.host, kind=EventKind.DISK_FULL, summary__startswith=_prefix(self.host, path))
            .exclude(detail__contains=ENDED)
            .order_by("-time")
            .values("pk", "time")
            .first()
        )
        if open_event:
            self._full[path] = _Full(open_event["pk"], open_event["time"], current.free)

    def _check(self, current: Space, now: datetime) -> None:
        path = current.path
        full = self._full.get(path)
        if full is None and current.full:
            event = log_event(
                EventKind.DISK_FULL,
                f"{_prefix(self.host, path)}: {human_bytes(current.free)} free of {human_bytes(current.size)}",
                source="collector", host=self.host, time=now,
                detail=f"free space below {human_bytes(current.full_mark)} (the full mark) at {now.isoformat()}",
            )  # fmt: skip
            self._full[path] = _Full(event.pk, now, current.free)
            alerting.tell("disk_full", event.pk)
        elif full is not None and current.roomy:
            full.room_since = full.room_since or now
            if (now - full.room_since).total_seconds() < ROOM_SECONDS:
                return
            del self._full[path]
            now = full.room_since  # it ended when the room came
            seconds = (now - full.since).total_seconds()
            Event.objects.filter(pk=full.event).update(
                summary=(
                    f"{_prefix(self.host, path)} for {seconds:.0f} s: {human_bytes(full.least)} free at the least, "
                    f"{human_bytes(current.free)} free again"
                )[:300],
                detail=Concat(F("detail"), Value(f"{ENDED}{now.isoformat()}, after {seconds:.1f} s")),
            )
        elif full is not None:
            full.least = min(full.least, current.free)
            full.room_since = None

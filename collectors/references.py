"""What an event's backend, endpoint and run ids stand for, asked of the apps that own them.

Events refer to a backend, an endpoint and a run by id only (collectors sits below campaigns
and imports nothing of it). The app that owns those models registers, in its AppConfig.ready(),
a resolver per kind: ids to objects in one query, a name to the ids it matches (the event
filters), and the choices a form offers. Pages, the API and Grafana then resolve a page of events in one query a kind,
never one a row. An id whose object is gone resolves to a `Deleted` stand-in, "#12 (deleted)":
the log keeps what happened.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

KINDS = ("backend", "endpoint", "run")


@dataclass(frozen=True)
class Resolver:
    by_ids: Callable[[list[int]], dict[int, Any]]
    ids_named: Callable[[str], list[int]]
    choices: Callable[[], list[tuple[int, str]]]


@dataclass(frozen=True)
class Deleted:
    """What a page shows for an object an event names that no longer exists."""

    kind: str
    pk: int
    state: str = ""
    summary: dict | None = None
    started_at: None = None
    finished_at: None = None
    deleted: bool = True

    @property
    def name(self) -> str:
        return f"#{self.pk} (deleted)"

    def __str__(self) -> str:
        return f"{self.kind} {self.name}"


_resolvers: dict[str, Resolver] = {}


def register(kind: str, resolver: Resolver) -> None:
    """Called by the app owning `kind`'s model, in its ready(); registering again replaces."""
    if kind not in KINDS:
        raise ValueError(f"events refer to {', '.join(KINDS)}, not {kind!r}")
    _resolvers[kind] = resolver


def resolve(kind: str, ids: Iterable[int]) -> dict[int, Any]:
    """The objects of `kind` with these ids, in one query; a missing one as `Deleted`."""
    wanted = sorted({i for i in ids if i is not None})
    if not wanted:
        return {}
    found = _resolvers[kind].by_ids(wanted) if kind in _resolvers else {}
    return {i: found.get(i) or Deleted(kind, i) for i in wanted}


def ids_named(kind: str, name: str) -> list[int]:
    """The ids of the objects of `kind` called `name` (none if no app registered the kind)."""
    return _resolvers[kind].ids_named(name) if kind in _resolvers else []


def choices(kind: str) -> list[tuple[int, str]]:
    """(id, name) of every object of `kind`, for a form's select."""
    return _resolvers[kind].choices() if kind in _resolvers else []


def attach(events: Iterable) -> list:
    """Set `event.backend`, `.endpoint` and `.run` to the objects their ids name (None for no
    id), one query a kind for all the events; returns the events as a list."""
    events = list(events)
    for kind in KINDS:
        found = resolve(kind, (getattr(event, f"{kind}_id") for event in events))
        for event in events:
            pk = getattr(event, f"{kind}_id")
            setattr(event, kind, found[pk] if pk is not None else None)
    return events

"""What a run involves: its endpoints, their backends, the hosts serving them, its window.

Read from the run's frozen snapshot, not from the endpoints as they are now: a door added to
an endpoint after the run did no work in it. Hosts are matched by the id frozen with them,
so a host renamed since is still found. Verdicts, disturbance, comparison and charts all
ask here, so they agree on which machines a run's figures are about.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from campaigns.models import Run
from campaigns.spec import RunSpec
from collectors.models import Host


@dataclass(frozen=True)
class Scope:
    hosts: frozenset[int]
    backends: frozenset[int]
    endpoints: frozenset[int]


def _endpoints(run: Run) -> list[dict]:
    snapshot = run.snapshot or {}
    return [*snapshot.get("sources", []), *snapshot.get("destinations", [])]


def run_scope(run: Run) -> Scope:
    """Host, backend and endpoint ids of the run's sources and destinations."""
    endpoints = _endpoints(run)
    return Scope(
        hosts=frozenset(h["id"] for ep in endpoints for h in ep.get("hosts", [])),
        backends=frozenset(ep["backend"] for ep in endpoints if ep.get("backend")),
        endpoints=frozenset(ep["id"] for ep in endpoints),
    )


def run_hosts(run: Run) -> list[Host]:
    """The hosts serving the run's endpoints (both sides), by name; hosts deleted since are gone."""
    ids = run_scope(run).hosts
    return list(Host.objects.filter(pk__in=ids).order_by("name")) if ids else []


def door_hosts(run: Run) -> list[Host]:
    """The hosts of the side whose doors do the work (``RunSpec.door_side``): a pull's source
    door only serves reads while its destination does the copy, and must not be judged as the
    door under test. A run whose working side names no host (a checksum-load run asks its
    sources and has no destination) is judged on every host it involves."""
    side = RunSpec.of(run).door_side
    endpoints = (run.snapshot or {}).get(f"{side}s", [])
    ids = {h["id"] for ep in endpoints for h in ep.get("hosts", [])}
    if not ids:
        return run_hosts(run)
    return list(Host.objects.filter(pk__in=ids).order_by("name"))


def run_window(run: Run) -> tuple[datetime, datetime] | None:
    """From the run's start to its end (now, while it runs); None before it started."""
    if not run.started_at:
        return None
    return run.started_at, run.finished_at or timezone.now()

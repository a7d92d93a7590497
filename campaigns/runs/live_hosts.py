"""Whether a host serves a run that is live now: its collector then samples faster (collectors.live)."""

from __future__ import annotations

from django.db.models import Q

from campaigns.choices import RunState
from campaigns.models import Run
from collectors.models import Host

# A pending run may wait long for its slot (an overlap, a worker): sampling starts with its copies.
_LIVE = (RunState.RUNNING, RunState.CANCELLING)
# The sides of a run's frozen snapshot whose endpoints list the hosts that serve them, and the
# client hosts of a pooled run.
_SIDES = ("sources", "destinations")


def involved_in_a_live_run(host: Host) -> bool:
    """One indexed query a tick: JSON containment on the frozen snapshot (the run's hosts as they
    were when it started), not the endpoints as they are now."""
    involved = Q()
    for side in _SIDES:
        involved |= Q(snapshot__contains={side: [{"hosts": [{"id": host.pk}]}]})
    involved |= Q(snapshot__contains={"clients": [{"name": host.name}]})
    return Run.objects.filter(involved, state__in=_LIVE).exists()

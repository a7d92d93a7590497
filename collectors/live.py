"""How often a host's collector samples: faster while a run of the host is live.

A verdict reads each door's resources per step from these samples. At the default 5 s, a step of a
few seconds holds one sample or none, and the verdict can only say "saturation unknown" (a door
held to a fifth of a core in steps of 8 files was never named). While a run whose doors include
the host is live, the collector samples every LIVE_SAMPLE_INTERVAL seconds instead, so a 20-s
step has about 20 samples a door. Which runs are live is the campaigns app's knowledge: it
registers the question here (collectors imports nothing of campaigns).
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings

from collectors.models import Host

_live_checks: list[Callable[[Host], bool]] = []


def register(check: Callable[[Host], bool]) -> None:
    """A question the collector asks each tick: does a live run involve this host?"""
    if check not in _live_checks:
        _live_checks.append(check)


def live_interval() -> float:
    return float(getattr(settings, "STORAGEOPS_LIVE_SAMPLE_INTERVAL", 1.0))


def interval_for(host: Host) -> float:
    """The seconds to the host's next tick: its own interval, or the live one while it is busier."""
    own = float(host.sample_interval)
    fast = live_interval()
    if own <= fast:
        return own
    return fast if any(check(host) for check in _live_checks) else own

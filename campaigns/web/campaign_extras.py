"""Parts of the campaign page that apps above campaigns add (alerts: "N subscriptions alert
about it"), registered in their AppConfig.ready(): campaigns imports none of them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from campaigns.models import Campaign

_parts: dict[str, Callable[[Campaign], Any]] = {}


def register(name: str, part: Callable[[Campaign], Any]) -> None:
    """`part(campaign)` becomes the campaign page's context variable `name`."""
    _parts[name] = part


def context(campaign: Campaign) -> dict[str, Any]:
    return {name: part(campaign) for name, part in _parts.items()}

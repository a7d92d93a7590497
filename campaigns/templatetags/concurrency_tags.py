"""A step's achieved concurrency as pages show it, read through campaigns.results.concurrency."""

from __future__ import annotations

from django import template

from campaigns.results import concurrency
from campaigns.results import refill_gap as gaps

register = template.Library()


@register.filter
def achieved(step: dict) -> dict:
    """{"mean", "max", "off", "text"} of a step row: `{% with a=s|achieved %}`."""
    mean, peak, off = concurrency.achieved(step)
    return {"mean": mean, "max": peak, "off": off, "text": concurrency.achieved_text(step)}


@register.filter
def refill_gap(step: dict) -> dict:
    """{"mean", "count", "text"} of a step's refill gap (campaigns.results.refill_gap): `{% with g=s|refill_gap %}`."""
    mean, count = gaps.gap(step)
    return {"mean": mean, "count": count, "text": gaps.gap_text(step)}

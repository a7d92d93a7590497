"""A step's achieved concurrency as pages show it, read through campaigns.results.concurrency."""

from __future__ import annotations

from django import template

from campaigns.results import concurrency

register = template.Library()


@register.filter
def achieved(step: dict) -> dict:
    """{"mean", "max", "off", "text"} of a step row: `{% with a=s|achieved %}`."""
    mean, peak, off = concurrency.achieved(step)
    return {"mean": mean, "max": peak, "off": off, "text": concurrency.achieved_text(step)}

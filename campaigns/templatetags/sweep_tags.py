"""A swept knob's value as people read it on a page (a 4 MB buffer, 1 GB files)."""

from __future__ import annotations

from django import template

from campaigns import sweeps

register = template.Library()


@register.filter
def axis_value(value, axis: str) -> str:
    return sweeps.value_text(axis, value)

"""A verdict as pages show it: badge, headline and rows from one generator (results.verdicts)."""

from __future__ import annotations

from django import template

from campaigns.results import verdicts

register = template.Library()


@register.filter
def verdict_view(verdict: dict | None) -> dict | None:
    """`{% with view=verdict|verdict_view %}`: badge, css, headline, statements, cause."""
    return verdicts.view(verdict) if verdict else None


@register.filter
def thin_samples(step: dict) -> str:
    """A saturation-table step whose doors had too few samples, in the verdict's own words."""
    return f"too few samples: {verdicts.thin_text(step)}"


@register.filter
def verdict_mark(verdict: dict | None) -> dict | None:
    """`{% with m=run.summary.verdict|verdict_mark %}`: the mark a run list shows beside the state
    of a run whose steps did not run as asked (scheduling gap, inconclusive, off target)."""
    return verdicts.mark(verdict)

"""How a run's planned transfers stand, as its badges and progress read it (campaigns.results.readers)."""

from __future__ import annotations

from django import template

from campaigns.models import Run
from campaigns.results import readers

register = template.Library()


@register.filter
def file_counts(run: Run) -> dict[str, int]:
    """{"ok", "failed", "skipped", "not_needed", "cancelled"}: `{% with c=run|file_counts %}`."""
    return readers.file_counts(run)

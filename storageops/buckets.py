"""Time buckets for charts: a width that gives a few hundred points whatever the span."""

from __future__ import annotations

import math

_WIDTHS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400)


def bucket_seconds(span_seconds: float, points: int = 300) -> int:
    """The smallest round width that cuts `span_seconds` into at most `points` buckets."""
    need = max(span_seconds, 1.0) / points
    for width in _WIDTHS:
        if width >= need:
            return width
    return int(math.ceil(need / 86400) * 86400)

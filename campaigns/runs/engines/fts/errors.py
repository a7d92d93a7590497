"""FTS's error mapping: a failed file's reason onto the categories every engine shares.

FTS reports gfal2's errno inside its own wording, so the shared rules of
`campaigns.runs.engines.errors` apply once the prefix is read.
"""

from __future__ import annotations

import re

from campaigns.choices import ErrorCategory
from campaigns.runs.engines.errors import categorize

# FTS3 reports a failed file as "SOURCE|DESTINATION|TRANSFER [errno] text" (the scope says
# which stage failed, the errno is gfal2's), or as free text from its own scheduler
# ("Probably stalled", a job that stayed in the queue for too long, a cancel).
_FTS_REASON = re.compile(r"^\s*(?P<scope>SOURCE|DESTINATION|TRANSFER|TRANSFER_PREPARATION)\s*\[(?P<code>-?\d+)\]\s*")


def parse_fts_reason(reason: str) -> tuple[str, int | None]:
    """The scope and errno of an FTS file reason ("", None when it has no such prefix)."""
    match = _FTS_REASON.match(reason or "")
    if not match:
        return "", None
    return match.group("scope"), int(match.group("code"))


def categorize_fts(reason: str) -> tuple[str, int | None]:
    """Category and errno for an FTS file reason; the raw reason is kept by the caller."""
    _, code = parse_fts_reason(reason)
    if re.search(r"canceled by the user|Transfer canceled", reason or "", re.I):
        return ErrorCategory.CANCELLED, code
    return categorize(code, reason or ""), code

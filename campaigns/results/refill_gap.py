"""The refill gap: how long a step's slots stood empty between one copy's end and the next
copy's start, read from the transfers' own start and end times (the engine's, where it reports
them).

An engine that starts queued copies only at a scheduler's pass leaves a freed slot empty until
the next pass; one whose copy thread starts its next copy at once reads ~0. Engines that explain
such a gap in their verdict read it from here (campaigns.results.engine_notes).

Per step: `gap_seconds`, the mean time from a copy's end (its start plus its duration: an engine's
times may be whole seconds, a duration is not) to the start of the copy that took its slot, over
`gaps` such refills. Each end is matched to the earliest start at or after it not matched to an
earlier end (the slot it freed is the first one refilled); an end no later start follows (the
step's tail) is no gap. A step measured after its warm-up (RunStep.measured_from) counts the ends
from there on.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

Copy = tuple[float, float, float | None]  # (started, finished, duration) of a copy that ran


def refill_gaps(copies: Iterable[Copy], since: float | None = None) -> list[float]:
    """The gaps (seconds) between each copy's end (finished at or after `since`) and the start of
    the copy that refilled its slot.

    Each end is matched, by its finish time, to the earliest start at or after it not matched
    yet: with whole-second times a start never reads earlier than the end it follows. The
    gap is that start less the copy's start plus its own duration, where the record has one
    (a duration is exact; a start and the next one, both at a scheduler pass, floor alike): a
    2.5-s copy refilled at the pass 4 s after it started reads 1.5 s, where its whole-second
    finish read 1 or 2 s by the pass's phase. A pairing may give one slot's end
    another's start in the same second: the mean is the same (the starts' sum less the ends')."""
    copies = list(copies)
    starts = sorted(start for start, _, _ in copies)
    ends = sorted((finished, start + duration if duration else finished) for start, finished, duration in copies
                  if since is None or finished >= since)  # fmt: skip
    gaps, at = [], 0
    for finished, end in ends:
        at = max(at, bisect.bisect_left(starts, finished))
        if at >= len(starts):
            break
        gaps.append(starts[at] - end)
        at += 1
    return gaps


def figures(copies: Iterable[Copy], since: float | None = None) -> dict:
    """{"gap_seconds": mean refill gap or None, "gaps": how many refills it is the mean of}. A
    mean below 0 (whole-second starts read before ends that their durations put later) is 0."""
    gaps = refill_gaps(copies, since)
    return {"gap_seconds": round(max(sum(gaps) / len(gaps), 0.0), 3) if gaps else None, "gaps": len(gaps)}


def gap(step: dict) -> tuple[float | None, int | None]:
    """(mean refill gap, refills) of a step row; (None, None) where it was never measured (a
    summary stored before the figure, or a live run's table, read from its buckets)."""
    return step.get("gap_seconds"), step.get("gaps")


def gap_text(step: dict) -> str:
    """The text "1.40 s (12)": what a table shows of a step's refill gap."""
    mean, count = gap(step)
    return "–" if mean is None else f"{mean:.2f} s ({count})"

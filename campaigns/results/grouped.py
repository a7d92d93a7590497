"""Table rows from grouped figures: rows per (step, door, state, error category) with counts,
bytes, first start and last end (campaigns.results.bucketed reads them from a run's buckets),
merged here into a total, a door or a step row.

What a live run's step chart and a trimmed comparison show: counts and sums, so hundreds of
thousands of rows never come into Python. Percentiles would need every duration, so these
rows leave them out; a finished run's stored summary has them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import datetime

from campaigns.choices import TransferState
from campaigns.models import Run
from campaigns.results import concurrency
from campaigns.results.analysis import figures
from campaigns.spec import RunSpec


def merged(rows: Iterable[dict], excluded: Iterable[tuple[datetime, datetime]] = ()) -> dict:
    """The figures of a set of group rows, with their failures per category."""
    rows = list(rows)
    firsts = [r["first"] for r in rows if r["first"]]
    lasts = [r["last"] for r in rows if r["last"]]
    errors: Counter = Counter()
    for r in rows:
        if r["state"] == TransferState.FAILED and r["n"]:
            errors[r["error_category"] or "other"] += r["n"]
    return {
        **figures(
            ok=sum(r["n"] for r in rows if r["state"] == TransferState.SUCCEEDED),
            failed=sum(r["n"] for r in rows if r["state"] == TransferState.FAILED),
            moved=round(sum(r["moved"] or 0 for r in rows)),
            first=min(firsts) if firsts else None,
            last=max(lasts) if lasts else None,
            excluded=excluded,
        ),
        "errors": dict(errors.most_common()),
    }


def step_table(
    run: Run,
    rows: list[dict],
    excluded: Iterable[tuple[datetime, datetime]] = (),
    achieved: dict[int, tuple[float | None, int | None]] | None = None,
) -> list[dict]:
    """The step rows of a run from groups that include "step", each with its concurrency and
    the concurrency it achieved (`achieved` per step, else read from the rows)."""
    spec, excluded = RunSpec.of(run), list(excluded)
    # A step whose every copy a trim left out has no figure to show (as in analysis.run_summary):
    # a throughput of 0 there would draw a collapse that never happened.
    indexes = sorted({r["step"] for r in rows if r["step"] is not None and r["n"]})
    return concurrency.with_achieved(
        run,
        [{"step": k, **spec.step_point(k), **merged((r for r in rows if r["step"] == k), excluded)} for k in indexes],
        achieved=achieved,
    )

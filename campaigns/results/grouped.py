"""A run's figures by aggregate SQL: one pass over its finished copies, grouped by whatever a
table needs (step, door) and by state and error category, merged here into table rows.

What a live run's step chart and a trimmed comparison read: the database counts and sums,
so hundreds of thousands of rows never come into Python. Percentiles would need every
duration, so these rows leave them out; a finished run's stored summary has them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import datetime

from django.db.models import Count, Max, Min, Q, Sum

from campaigns.choices import TransferState
from campaigns.models import Run, Transfer
from campaigns.results import concurrency
from campaigns.results.analysis import figures
from campaigns.spec import RunSpec

_OK, _FAILED = Q(state=TransferState.SUCCEEDED), Q(state=TransferState.FAILED)


def groups(run: Run, by: tuple[str, ...], keep: Q | None = None) -> list[dict]:
    """One row per (*by, state, error category): n, moved, first and last over the copies
    `keep` selects (all by default), n_all and moved_all over every copy."""
    keep = keep if keep is not None else Q()
    return list(
        Transfer.objects.filter(run=run)
        .filter(_OK | _FAILED)
        .values(*by, "state", "error_category")
        .annotate(
            n=Count("pk", filter=keep),
            moved=Sum("bytes_transferred", filter=keep & _OK),
            first=Min("started_at", filter=keep),
            last=Max("finished_at", filter=keep),
            n_all=Count("pk"),
            moved_all=Sum("bytes_transferred", filter=_OK),
        )
        .order_by()
    )


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
            moved=sum(r["moved"] or 0 for r in rows),
            first=min(firsts) if firsts else None,
            last=max(lasts) if lasts else None,
            excluded=excluded,
        ),
        "errors": dict(errors.most_common()),
    }


def step_table(run: Run, rows: list[dict], excluded: Iterable[tuple[datetime, datetime]] = ()) -> list[dict]:
    """The step rows of a run from groups that include "step", each with its concurrency."""
    spec, excluded = RunSpec.of(run), list(excluded)
    # A step whose every copy a trim left out has no figure to show (as in analysis.run_summary):
    # a throughput of 0 there would draw a collapse that never happened.
    indexes = sorted({r["step"] for r in rows if r["step"] is not None and r["n"]})
    return concurrency.with_achieved(
        run,
        [{"step": k, **spec.step_point(k), **merged((r for r in rows if r["step"] == k), excluded)} for k in indexes],
    )

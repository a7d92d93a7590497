"""A run and its retries as one chain ("retry failed" re-drives what a run did not succeed at,
as a new run linked to it): how much of the first run's plan the chain has done by now.

Each retry plans exactly the transfers its predecessor did not succeed at, so the runs of a
chain succeed at disjoint sets of the first run's transfers and their counters add up: the
chain's figure needs no transfer row (it stays true after retention).
"""

from __future__ import annotations

from campaigns.models import Run

_FIELDS = ("pk", "state", "planned_files", "files_done", "files_failed", "files_skipped", "retry_of")


def retry_chain(run: Run) -> dict | None:
    """The chain `run` belongs to, first run first, with the share of the first run's planned
    transfers that succeeded in any of them; None for a run that is no retry and has none."""
    chain = [run]
    while chain[0].retry_of_id:
        chain.insert(0, Run.objects.only(*_FIELDS).get(pk=chain[0].retry_of_id))
    while True:
        following = Run.objects.only(*_FIELDS).filter(retry_of=chain[-1]).order_by("pk").first()
        if following is None:
            break
        chain.append(following)
    if len(chain) == 1:
        return None
    planned = chain[0].planned_files
    done = sum(r.files_done for r in chain)
    return {
        "runs": [
            {"id": r.pk, "state": r.state, "files_done": r.files_done, "planned_files": r.planned_files} for r in chain
        ],
        "planned_files": planned,
        "files_done": done,
        "percent": round(100.0 * done / planned, 1) if planned else 100.0,
        "complete": done >= planned,
    }

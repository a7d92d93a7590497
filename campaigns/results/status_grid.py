"""The status grid (MaDDash's red/green matrix for storage): destination backends by campaigns,
each cell the latest finished run of that campaign on that backend and its judgement: the
backend's own where the run wrote to several (each judged on its own copies), else the run's."""

from __future__ import annotations

from dataclasses import dataclass

from campaigns.models import Run

# How far back the grid looks: a site's latest runs fill it; a cell whose last run is older
# than this many finished runs shows empty rather than costing a scan of a year of runs.
LOOK_BACK_RUNS = 2000


@dataclass(frozen=True)
class Cell:
    run_id: int
    state: str
    judgement: str  # within, better, regressed, no_baseline, or "" for runs judged before it existed
    headline: str
    finished_at: object


def grid() -> dict:
    """{"campaigns": [names], "rows": [(backend, [(campaign, Cell or None, colour class)])]}."""
    latest = (
        Run.objects.filter(finished_at__isnull=False)
        .order_by("-finished_at")
        .values_list("pk", "state", "finished_at", "campaign__name", "snapshot__destinations",
                     "summary__judgement__status", "summary__judgement__headline",
                     "summary__judgement__backends")[:LOOK_BACK_RUNS]
    )  # fmt: skip
    cells: dict[tuple[str, str], Cell] = {}
    for pk, state, finished_at, campaign, destinations, status, headline, by_backend in latest:
        for backend in sorted({d.get("backend_name") or "" for d in destinations or []} - {""}):
            own = (by_backend or {}).get(backend)
            text = headline or ""
            if own and own != status:
                # A run over several backends is judged on each: this cell is this backend's.
                text = f"{backend}: {own}. The run: {text}"
            cells.setdefault((backend, campaign), Cell(pk, state, own or status or "", text, finished_at))
    campaigns = sorted({c for _, c in cells})
    rows = [
        (backend, [(campaign, cell := cells.get((backend, campaign)), cell_class(cell)) for campaign in campaigns])
        for backend in sorted({b for b, _ in cells})
    ]
    return {"campaigns": campaigns, "rows": rows}


def cell_class(cell: Cell | None) -> str:
    """The colour of a cell: what went wrong first (the run), then how it compares (the judgement)."""
    if cell is None:
        return "empty"
    if cell.state in ("failed", "partial", "cancelled"):
        return "bad" if cell.state == "failed" else "warn"
    return {"regressed": "bad", "better": "ok", "within": "ok"}.get(cell.judgement, "unknown")

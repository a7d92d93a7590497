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
    # within, improved ("better" in runs judged by an earlier release), regressed, recovered, no_baseline, or ""
    judgement: str
    headline: str
    finished_at: object
    ongoing_since: int | None = None  # the first run of a regression still going on


def grid() -> dict:
    """{"campaigns": [names], "rows": [(backend, [(campaign, Cell or None, colour class)])]}."""
    latest = (
        Run.objects.filter(finished_at__isnull=False)
        .order_by("-finished_at")
        .values_list("pk", "state", "finished_at", "campaign__name", "snapshot__destinations",
                     "summary__judgement__status", "summary__judgement__headline",
                     "summary__judgement__backends", "summary__judgement__ongoing__since")[:LOOK_BACK_RUNS]
    )  # fmt: skip
    cells: dict[tuple[str, str], Cell] = {}
    for pk, state, finished_at, campaign, destinations, status, headline, by_backend, since in latest:
        for backend in sorted({d.get("backend_name") or "" for d in destinations or []} - {""}):
            own = (by_backend or {}).get(backend)
            text = headline or ""
            if own and own != status:
                # A run over several backends is judged on each: this cell is this backend's.
                text = f"{backend}: {own}. The run: {text}"
            cell = Cell(pk, state, own or status or "", text, finished_at, since if status == "regressed" else None)
            cells.setdefault((backend, campaign), cell)
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
    ok = ("improved", "better", "within", "recovered")  # "better": the word of an earlier release for "improved"
    return "bad" if cell.judgement == "regressed" else ("ok" if cell.judgement in ok else "unknown")

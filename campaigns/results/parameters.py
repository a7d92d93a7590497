"""A run's parameters as people compare and read them.

`parameters` reads them through the RunSpec, so a run frozen before a field existed compares
equal to one frozen with that field's default. `byte_budget` is what the run page shows
beside the frozen snapshot: the campaign's byte budget and the one the run was given.
"""

from __future__ import annotations

from typing import Any

from campaigns.models import Run
from campaigns.spec import DEFAULT_BYTE_BUDGET_LABEL, PARAMETER_NAMES, RunSpec


def _plain(name: str, value: Any) -> Any:
    if name == "file_mix":
        return [{"count": count, "size": size} for count, size in value]
    return list(value) if isinstance(value, tuple) else value


def parameters(run: Run) -> dict[str, Any]:
    """Every parameter of the run's spec, as JSON values (what a comparison lines up)."""
    spec = RunSpec.of(run)
    return {name: _plain(name, getattr(spec, name)) for name in PARAMETER_NAMES}


def byte_budget(run: Run) -> dict[str, Any]:
    """The campaign's own per-run byte budget and the budget this run got, told apart: the
    run may move only the tightest of that and what was left of the daily and weekly ones."""
    spec = RunSpec.of(run)
    return {
        "campaign": spec.campaign_max_bytes,
        "run": spec.max_bytes,
        "label": spec.byte_budget_label,
        "cut": spec.byte_budget_label != DEFAULT_BYTE_BUDGET_LABEL,
    }

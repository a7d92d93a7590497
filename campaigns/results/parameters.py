"""A run's parameters as people compare and read them.

`parameters` reads them through the RunSpec, so a run frozen before a field existed compares
equal to one frozen with that field's default.
"""

from __future__ import annotations

from typing import Any

from campaigns.models import Run
from campaigns.spec import PARAMETER_NAMES, RunSpec


def _plain(name: str, value: Any) -> Any:
    if name == "file_mix":
        return [{"count": count, "size": size} for count, size in value]
    return list(value) if isinstance(value, tuple) else value


def parameters(run: Run) -> dict[str, Any]:
    """Every parameter of the run's spec, as JSON values (what a comparison lines up)."""
    spec = RunSpec.of(run)
    return {name: _plain(name, getattr(spec, name)) for name in PARAMETER_NAMES}

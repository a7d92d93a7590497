"""A run's steps as the run recorded them: each step's parameters read from its RunStep row.

The step row is the one source of what a step ran with (its concurrency, and in a sweep every
swept knob): tables, verdicts and exports read it here, not from the snapshot's plan by index,
so a plan and a step that ever differ (a step skipped, an older run's plan read by a newer
release) are never shown as each other. The snapshot keeps what was asked; a step with no row
(none was reached) falls back to it.
"""

from __future__ import annotations

from campaigns.models import Run, RunStep
from campaigns.spec import RunSpec


def step_points(run: Run, spec: RunSpec | None = None) -> dict[int, dict]:
    """{step index: {"concurrency": …, and each swept axis: its value, "tpc_mode": …}} of the run's
    recorded steps."""
    spec = spec or RunSpec.of(run)
    axes = spec.swept_axes
    rows = RunStep.objects.filter(run=run).values_list("index", "concurrency", "point")
    return {
        index: {"concurrency": concurrency, **{axis: (point or {}).get(axis) for axis in axes},
                "tpc_mode": (point or {}).get("tpc_mode")}
        for index, concurrency, point in rows
    }  # fmt: skip


def columns(points: dict[int, dict], spec: RunSpec, index: int | None) -> dict:
    """A step row's parameter columns: its concurrency, and in a sweep every swept knob."""
    recorded = points.get(index) if index is not None else None
    if recorded is None:
        return spec.planned_columns(index)
    return {key: value for key, value in recorded.items() if key != "tpc_mode"}


def mode_asked(points: dict[int, dict], spec: RunSpec, index: int) -> str | None:
    """The copy mode a step asked for (its point's: a sweep may change it)."""
    recorded = points.get(index)
    if recorded is not None and recorded.get("tpc_mode") is not None:
        return recorded["tpc_mode"]
    point = spec.point_of(index)
    return point.tpc_mode if point else None

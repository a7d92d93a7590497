"""Parameter sweeps: the points a run steps through, each a full set of the knobs a copy is made with.

A campaign sweeps its concurrency steps (`concurrency_steps`) and, with `sweep`, any of the
other axes too: `{"streams": [1, 4, 8]}` runs every concurrency step at each number of streams,
`{"streams": [1, 4], "tcp_buffer_size": [0, 4194304]}` every combination (a matrix, the way
Tokyo charted gridFTP streams against clients). A sweep of one axis at a single concurrency is a
list. The order is the axes' (below), concurrency innermost, so a matrix row is a concurrency
sweep at one setting of the rest. Each step records its full point, whatever was swept.

What a sweep may hold is checked beside the model (campaigns.models.sweep_rules).
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass

from campaigns.models.sweep_rules import AXES
from storageops.units import human_bytes

__all__ = ["AXES", "AXIS_LABELS", "StepPoint", "label", "points", "setting_text", "swept_axes", "value_text"]

AXIS_LABELS = {
    "concurrency": "concurrency", "file_size": "file size", "streams": "streams", "tcp_buffer_size": "TCP buffer",
    "tpc_mode": "mode",
}  # fmt: skip
_SIZES = ("file_size", "tcp_buffer_size")


@dataclass(frozen=True, slots=True)
class StepPoint:
    """What one step runs with: its concurrency and every knob a sweep may change."""

    concurrency: int
    streams: int
    tcp_buffer_size: int
    tpc_mode: str
    file_size: int

    def as_dict(self) -> dict:
        return asdict(self)


def swept_axes(sweep: dict | None) -> list[str]:
    """The axes a sweep changes (more than one value), outermost first."""
    return [axis for axis in AXES if len((sweep or {}).get(axis) or []) > 1]


def points(concurrency_steps, sweep: dict | None, defaults: dict) -> tuple[StepPoint, ...]:
    """Every step's point, in the order the run takes them: each setting of the swept axes
    (outermost first), and within it every concurrency step."""
    sweep = sweep or {}
    values = [sweep.get(axis) or [defaults[axis]] for axis in AXES]
    return tuple(
        StepPoint(concurrency=int(c), **dict(zip(AXES, combo, strict=True)))
        for combo in itertools.product(*values)
        for c in concurrency_steps
    )


def label(point: dict, axes: list[str]) -> str:
    """A point named by what varies: "concurrency 4 · streams 8"."""
    return " · ".join(f"{AXIS_LABELS.get(a, a)} {value_text(a, point.get(a))}" for a in ["concurrency", *axes])


def setting_text(point: dict) -> str:
    """The swept knobs a step row holds, besides its concurrency: "streams 4, TCP buffer 4 MB"."""
    return ", ".join(f"{AXIS_LABELS[a]} {value_text(a, point[a])}" for a in AXES if a in point)


def value_text(axis: str, value) -> str:
    """An axis' value as people read it: sizes in bytes units (a 4 MB buffer, 1 GB files)."""
    if axis in _SIZES and isinstance(value, int) and not isinstance(value, bool):
        return human_bytes(value)
    return str(value)

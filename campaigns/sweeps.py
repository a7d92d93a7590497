"""Parameter sweeps: the points a run steps through, each a full set of the knobs a copy is made with.

A campaign sweeps its concurrency steps (`concurrency_steps`) and, with `sweep`, any of the
other axes too: `{"streams": [1, 4, 8]}` runs every concurrency step at each number of streams,
`{"streams": [1, 4], "tcp_buffer_size": [0, 4194304]}` every combination (a matrix, the way
Tokyo charted gridFTP streams against clients). A sweep of one axis at a single concurrency is a
list. The order is the axes' (below), concurrency innermost, so a matrix row is a concurrency
sweep at one setting of the rest. Each step records its full point, whatever was swept.

Only the standard library: the model validates with it and the engines read points from it.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass

# The axes a sweep may name, outermost first, with the bounds the campaign's own fields have.
AXES = ("tpc_mode", "tcp_buffer_size", "streams")
_TPC_MODES = ("auto", "pull", "push", "streamed")
MAX_STEPS = 200
AXIS_LABELS = {"concurrency": "concurrency", "streams": "streams", "tcp_buffer_size": "TCP buffer", "tpc_mode": "mode"}


@dataclass(frozen=True, slots=True)
class StepPoint:
    """What one step runs with: its concurrency and every knob a sweep may change."""

    concurrency: int
    streams: int
    tcp_buffer_size: int
    tpc_mode: str

    def as_dict(self) -> dict:
        return asdict(self)


def validate_sweep(value: object) -> None:
    """Raise ValueError with a sentence a form can show, for anything but {axis: [values]}."""
    if value in (None, {}):
        return
    if not isinstance(value, dict):
        raise ValueError('Give the swept axes as {"streams": [1, 4, 8]}, or leave it empty.')
    unknown = sorted(set(value) - set(AXES))
    if unknown:
        hint = " (concurrency is swept by the concurrency steps)" if "concurrency" in unknown else ""
        raise ValueError(f"Unknown sweep axis {', '.join(unknown)}{hint}: use {', '.join(AXES)}.")
    for axis, values in value.items():
        if not isinstance(values, list) or not values:
            raise ValueError(f"{axis}: give a list of at least one value.")
        if len(set(map(str, values))) != len(values):
            raise ValueError(f"{axis}: each value once.")
        for v in values:
            _check_value(axis, v)


def _check_value(axis: str, v: object) -> None:
    if axis == "tpc_mode":
        if v not in _TPC_MODES:
            raise ValueError(f"tpc_mode: {v!r} is not one of {', '.join(_TPC_MODES)}.")
        return
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"{axis}: {v!r} is not a whole number.")
    low, high = (1, 64) if axis == "streams" else (0, 2**31 - 1)
    if not low <= v <= high:
        raise ValueError(f"{axis}: {v} is outside {low}…{high}.")


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


def step_count(concurrency_steps, sweep: dict | None) -> int:
    """How many steps a run of these would take; tolerant of values the validators refuse."""
    count = len(concurrency_steps) if isinstance(concurrency_steps, list) else 1
    for axis in AXES:
        values = (sweep or {}).get(axis)
        count *= max(len(values), 1) if isinstance(values, list) else 1
    return count


def label(point: dict, axes: list[str]) -> str:
    """A point named by what varies: "concurrency 4 · streams 8"."""
    return " · ".join(f"{AXIS_LABELS.get(a, a)} {point.get(a)}" for a in ["concurrency", *axes])

"""A run's parameters as one typed, frozen value, built once from the run's snapshot.

The snapshot is what a run froze of its campaign when it was created (a JSON dict, kept
forever so a result can be explained). Code reads it through `RunSpec`, never as a raw dict:
the defaults live in one place (the Campaign model's own field defaults, so a snapshot taken
before a field existed reads as that field's default), and derived facts such as which side's
door does the work are defined once.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import cache
from typing import Any

from campaigns import sweeps
from campaigns.models.definitions import Campaign
from campaigns.sweeps import StepPoint

# A budget label says which budget stopped a run ("daily byte budget reached ...").
DEFAULT_BYTE_BUDGET_LABEL = "byte budget"


@dataclass(frozen=True, slots=True)
class ClientSpec:
    """A client host of the run's pool: its name (its queue is client.NAME) and its weight."""

    name: str
    weight: int = 1


@dataclass(frozen=True, slots=True)
class RetrySpec:
    """A run made by "retry failed": which run it retries and which of that run's transfers.

    `seed` is the seed of the first run of the chain, so a file mix is shuffled the same way
    and each index keeps its source and size."""

    of: int
    indices: tuple[int, ...]
    seed: int


@dataclass(frozen=True, slots=True)
class RunSpec:
    campaign_id: int | None
    name: str
    kind: str
    engine: str
    source_path: str
    destination_path: str
    create_sources: bool
    file_count: int
    file_size: int
    file_mix: tuple[tuple[int, int], ...]  # (count, size) pairs; empty when file_count x file_size
    source_file_count: int | None
    direction: str
    tpc_mode: str
    checksum_mode: str
    checksum_algorithm: str
    streams: int
    tcp_buffer_size: int
    timeout: int
    overwrite: bool
    create_parent: bool
    retries: int
    retry_delay: int
    concurrency_steps: tuple[int, ...]
    step_seconds: int | None
    step_files: int | None
    step_barrier: str
    start_together: bool
    max_bytes: int | None
    max_duration: int | None
    cancel_grace: int
    max_bytes_per_day: int | None
    max_bytes_per_week: int | None
    allow_overlap: bool
    cleanup: str
    target_rate_bps: int | None
    byte_budget_label: str = DEFAULT_BYTE_BUDGET_LABEL
    source_listing: str = ""  # "", "folder" or "urls": existing data, read only
    source_urls: str = ""
    # The campaign's own per-run byte limit; max_bytes above is what this run may move: the
    # tightest of that and what was left of the daily and weekly budgets when it was created.
    campaign_max_bytes: int | None = None
    sweep: dict = field(default_factory=dict)  # {axis: [values]} crossed with the concurrency steps
    # The engine's own options, as its options form cleaned them (campaigns.models.engine_registry).
    engine_options: dict = field(default_factory=dict)
    retry: RetrySpec | None = None
    clients: tuple[ClientSpec, ...] = ()  # a client pool; empty: the driving worker copies
    # Every step's full parameter point, in order (campaigns.sweeps): derived, not a parameter.
    points: tuple[StepPoint, ...] = ()

    @classmethod
    def from_snapshot(cls, snapshot: dict) -> RunSpec:
        parameters = snapshot.get("parameters") or {}
        values: dict[str, Any] = {}
        for name, default in _campaign_defaults().items():
            value = parameters.get(name, default)
            values[name] = default if value is None and default is not None else value
        values["file_mix"] = tuple((int(m["count"]), int(m["size"])) for m in (parameters.get("file_mix") or []))
        values["concurrency_steps"] = tuple(int(c) for c in values["concurrency_steps"])
        values["campaign_max_bytes"] = values["max_bytes"]
        budget = snapshot.get("budget") or {}
        if budget:
            values["max_bytes"] = budget["max_bytes"]
            values["byte_budget_label"] = budget.get("label") or DEFAULT_BYTE_BUDGET_LABEL
        retry = snapshot.get("retry")
        if retry:
            values["retry"] = RetrySpec(
                of=int(retry["of"]), indices=tuple(int(i) for i in retry["indices"]), seed=int(retry["seed"])
            )
        values["sweep"] = dict(values.get("sweep") or {})
        values["engine_options"] = dict(values.get("engine_options") or {})
        values["clients"] = tuple(
            ClientSpec(str(c["name"]), int(c.get("weight") or 1)) for c in snapshot.get("clients") or []
        )
        values["points"] = sweeps.points(
            values["concurrency_steps"],
            values["sweep"],
            {axis: values[axis] for axis in sweeps.AXES},
        )
        return cls(campaign_id=snapshot.get("campaign_id"), **values)

    @classmethod
    def of(cls, run) -> RunSpec:
        """The spec of a Run, built once per instance (a run's snapshot never changes)."""
        spec = getattr(run, "_spec", None)
        if spec is None:
            spec = cls.from_snapshot(run.snapshot or {})
            run._spec = spec
        return spec

    # -- facts derived from the parameters, defined here once ---------------------------------
    @property
    def door_side(self) -> str:
        """The side whose door does the work: the destination pulls (the default), the source
        pushes. Its CPU, network and throughput are the door figures of a run."""
        return "source" if self.tpc_mode == "push" else "destination"

    def concurrency_of(self, step_index: int | None) -> int | None:
        """The concurrency a step index stands for (the one join of step to concurrency)."""
        point = self.point_of(step_index)
        return point.concurrency if point else None

    def point_of(self, step_index: int | None) -> StepPoint | None:
        """Everything a step index stands for: its concurrency and the swept knobs' values."""
        if step_index is None or not 0 <= step_index < len(self.points):
            return None
        return self.points[step_index]

    def planned_columns(self, step_index: int | None) -> dict:
        """A step's parameter columns as planned: its concurrency, and with a sweep every swept knob
        (what a step ran with is its RunStep row: campaigns.results.step_points)."""
        point = self.point_of(step_index)
        if point is None:
            return {"concurrency": None}
        if not self.sweep:
            return {"concurrency": point.concurrency}
        return {"concurrency": point.concurrency, **{axis: getattr(point, axis) for axis in self.swept_axes}}

    @property
    def swept_axes(self) -> list[str]:
        """The knobs besides concurrency that change from step to step."""
        return sweeps.swept_axes(self.sweep)


# The names a snapshot's "parameters" hold (planning.PARAMETER_FIELDS), with the model's defaults.
PARAMETER_NAMES = tuple(
    f.name
    for f in fields(RunSpec)
    if f.name not in ("campaign_id", "byte_budget_label", "campaign_max_bytes", "retry", "points", "clients")
)


@cache
def _campaign_defaults() -> dict[str, Any]:
    defaults: dict[str, Any] = {}
    for name in PARAMETER_NAMES:
        if name not in defaults:
            model_field = Campaign._meta.get_field(name)
            defaults[name] = model_field.get_default() if model_field.has_default() else None
    return defaults

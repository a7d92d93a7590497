"""The FTS engine's options (Campaign.engine_options of an FTS campaign): which FTS instance
runs the transfers, the jobs' priority, and strict copy. One schema for the model's check, the
campaign form and the API.

A run freezes them in its snapshot's parameters ("engine_options"); runs frozen before they
moved there (migration campaigns 0016) hold fts_instance_id, fts_priority and fts_strict_copy,
which `FtsOptions.from_parameters` still reads (a retry of such a run reuses its snapshot).
"""

from __future__ import annotations

from dataclasses import dataclass

from django import forms

from campaigns.runs.engines.fts.models import FtsInstance
from campaigns.runs.engines.fts.scheduling_gap import DEFAULT_SCHEDULING_INTERVAL

DEFAULT_PRIORITY = 3


class FtsOptionsForm(forms.Form):
    instance = forms.ModelChoiceField(
        FtsInstance.objects.all(),
        label="FTS instance",
        help_text="The FTS3 server that runs this campaign's transfers.",
        error_messages={
            "required": "Choose the FTS instance that runs this campaign's transfers.",
            "invalid_choice": "There is no FTS instance with this id.",
        },
    )
    priority = forms.IntegerField(
        label="FTS priority", min_value=1, max_value=5, required=False, initial=DEFAULT_PRIORITY,
        help_text="1 (lowest) to 5; empty: 3.",
    )  # fmt: skip
    strict_copy = forms.BooleanField(
        label="FTS strict copy", required=False, help_text="Copy only: no checksum, size or parent-directory checks."
    )
    measure_files = forms.IntegerField(
        label="Files measured at the step's concurrency", min_value=0, max_value=100_000, required=False,
        help_text="FTS applies a step's link limit only at its optimizer's next pass (every 60 s by default): "
        "each step gets this many files more than step_files for that warm-up, exactly, and its figures "
        "are read from when it first ran at its concurrency. Empty or 0: steps of step_files files, "
        "warm-up included. Needs steps bounded by files.",
    )  # fmt: skip
    scheduling_interval = forms.FloatField(
        label="FTS scheduling interval (s)", min_value=0.1, max_value=600, required=False,
        help_text="The instance's SchedulingInterval: FTS starts queued files only at its scheduler's passes, "
        "so a slot idles up to this long after each copy. Verdicts say when that held a step below its "
        "concurrency. Empty: FTS's default, 2 s.",
    )  # fmt: skip

    def as_options(self) -> dict:
        """The cleaned options as JSON values: the instance by its id."""
        data = self.cleaned_data
        priority = data.get("priority")
        options = {
            "instance": data["instance"].pk,
            "priority": DEFAULT_PRIORITY if priority is None else priority,
            "strict_copy": bool(data.get("strict_copy")),
            "measure_files": data.get("measure_files") or 0,
        }
        # Only when given: without it FTS's default is assumed, and a verdict says so.
        if data.get("scheduling_interval"):
            options["scheduling_interval"] = data["scheduling_interval"]
        return options


@dataclass(frozen=True, slots=True)
class FtsOptions:
    instance_id: int | None = None
    priority: int = DEFAULT_PRIORITY
    strict_copy: bool = False
    measure_files: int = 0
    # None: not given, FTS's default (DEFAULT_SCHEDULING_INTERVAL) is assumed.
    scheduling_interval: float | None = None

    @property
    def pass_seconds(self) -> float:
        """FTS's scheduling interval: the campaign's, else FTS's default."""
        return self.scheduling_interval or DEFAULT_SCHEDULING_INTERVAL

    @classmethod
    def from_parameters(cls, parameters: dict) -> FtsOptions:
        options = parameters.get("engine_options") or {}
        if options:
            return cls(
                options.get("instance"),
                options.get("priority", DEFAULT_PRIORITY),
                options.get("strict_copy", False),
                options.get("measure_files") or 0,
                options.get("scheduling_interval") or None,
            )
        # A snapshot frozen before engine_options existed.
        return cls(
            parameters.get("fts_instance_id"),
            parameters.get("fts_priority", DEFAULT_PRIORITY),
            parameters.get("fts_strict_copy", False),
        )

    @classmethod
    def of(cls, snapshot: dict) -> FtsOptions:
        return cls.from_parameters(snapshot.get("parameters") or {})

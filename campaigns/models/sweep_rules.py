"""What a campaign's `sweep` may hold: the axes, their values' bounds, the steps it makes.

The model validates with it; campaigns.sweeps turns a valid sweep into the points a run steps
through. Kept beside the models (the bottom room) since a field's validator lives with its field.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError

from campaigns import choices

# The axes a sweep may name, outermost first, with the bounds the campaign's own fields have.
AXES = ("file_size", "tpc_mode", "tcp_buffer_size", "streams")
MAX_STEPS = 200


def validate_sweep(value: object) -> None:
    """A sentence a form can show, for anything but {axis: [values]}."""
    if value in (None, {}):
        return
    if not isinstance(value, dict):
        raise ValidationError('Give the swept axes as {"streams": [1, 4, 8]}, or leave it empty.')
    unknown = sorted(set(value) - set(AXES))
    if unknown:
        hint = " (concurrency is swept by the concurrency steps)" if "concurrency" in unknown else ""
        raise ValidationError(f"Unknown sweep axis {', '.join(unknown)}{hint}: use {', '.join(AXES)}.")
    for axis, values in value.items():
        if not isinstance(values, list) or not values:
            raise ValidationError(f"{axis}: give a list of at least one value.")
        if len(set(map(str, values))) != len(values):
            raise ValidationError(f"{axis}: each value once.")
        for v in values:
            _check_value(axis, v)


def _check_value(axis: str, v: object) -> None:
    if axis == "tpc_mode":
        if v not in choices.TpcMode.values:
            raise ValidationError(f"tpc_mode: {v!r} is not one of {', '.join(choices.TpcMode.values)}.")
        return
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValidationError(f"{axis}: {v!r} is not a whole number.")
    low, high = {"streams": (1, 64), "file_size": (1, settings.STORAGEOPS_MAX_FILE_SIZE)}.get(axis, (0, 2**31 - 1))
    if not low <= v <= high:
        raise ValidationError(f"{axis}: {v} is outside {low}…{high}.")


def step_count(concurrency_steps, sweep) -> int:
    """How many steps a run of these would take; tolerant of values the validators refuse."""
    count = len(concurrency_steps) if isinstance(concurrency_steps, list) else 1
    for axis in AXES:
        values = sweep.get(axis) if isinstance(sweep, dict) else None
        count *= max(len(values), 1) if isinstance(values, list) else 1
    return count


def sweep_errors(campaign) -> dict[str, str]:
    """What a campaign's other knobs forbid of its sweep (Campaign.clean)."""
    sweep = campaign.sweep
    count = step_count(campaign.concurrency_steps, sweep)
    errors: dict[str, str] = {}
    if count > MAX_STEPS:
        errors["sweep"] = f"{count} steps: a run takes at most {MAX_STEPS}. Sweep fewer values."
    elif isinstance(sweep, dict) and sweep and campaign.kind == choices.CampaignKind.CHECKSUM_LOAD:
        errors["sweep"] = "A checksum load copies nothing: only its concurrency can be swept."
    elif isinstance(sweep, dict) and "file_size" in sweep:
        errors.update(_file_size_errors(campaign, count))
    return errors


def _file_size_errors(campaign, count: int) -> dict[str, str]:
    """A file-size sweep plans each step's files at that step's size, in step order: the steps
    must be bounded by files, and the plan is exactly that many files a step."""
    if not campaign.step_files:
        return {"step_files": "A file-size sweep plans each step's files at its size: bound the steps by files."}
    if campaign.file_mix or campaign.source_listing:
        return {"sweep": "A file-size sweep sets the files' sizes itself: no file mix, no existing data."}
    if campaign.file_count != campaign.step_files * count:
        return {
            "file_count": f"A file-size sweep plans {campaign.step_files} files a step over {count} steps: "
            f"set the file count to {campaign.step_files * count}."
        }
    return {}


def swept_bytes(campaign) -> int | None:
    """The bytes a file-size sweep plans (step_files files at each step's size), or None."""
    sizes = campaign.sweep.get("file_size") if isinstance(campaign.sweep, dict) else None
    if not sizes or not campaign.step_files or not all(isinstance(s, int) for s in sizes):
        return None
    others = step_count(campaign.concurrency_steps, {k: v for k, v in campaign.sweep.items() if k != "file_size"})
    return campaign.step_files * others * sum(sizes)

"""The engines a run can go through, after NetBox's registries: each engine's package registers
one `EngineEntry` when the app is ready, and everything that used to ask "is it FTS?" asks
the entry instead (the model's checks, the snapshot, the executor, the drive task, the forms).

It lives in the bottom room (beside the models and choices) so that every room may read it:
the model's `clean`, the spec, the run services, the pages and the API. It imports nothing of
the project; the callables an entry carries come from the engine's own package, which imports
downwards (campaigns/runs/engines/<name>/), so the registry adds no upward import.

Adding an engine (docs/architecture.md, "Add an engine"): a package with an executor and an
`engine` module that calls `register_engine(EngineEntry(...))`, and an app of its own (`apps.py`,
in INSTALLED_APPS) whose ready() imports it; its models, if any, in that app (its per-transfer
records go through `transfer_extras`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError

# The drive task every engine gets unless it names its own: routed to the "transfers" queue
# (CELERY_TASK_ROUTES), where the worker's copy slots are.
DEFAULT_DRIVE_TASK = "campaigns.drive_run"


def _no_errors(campaign) -> dict[str, str]:
    return {}


def _no_reasons(campaign) -> list[str]:
    return []


def _no_extras(campaign) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class EngineEntry:
    """What the rest of the project needs to know of one engine.

    name, label: the value Campaign.engine stores (at most 10 characters) and what pages show.
    build_executor(run, lease_holder, copier_factory): the executor that drives a run's copies
        (campaigns.runs.executors.base.Executor); copier_factory is the gfal2 copier the driver
        also uses for sources and clean-up, which tests replace.
    drive_task: the Celery task name `starting.dispatch` sends a run of this engine to. An engine
        of its own (FTS: "campaigns.drive_fts_run") is routed to "transfers" too: a driver lasts
        the whole run, and "control" must stay free for beat's short tasks.
    options_form: a Django form class, the schema of the engine's options (Campaign.engine_options,
        a JSON object): it validates them for the model, the campaign form shows its fields
        (named "<engine>_<option>") and the API documents them. None: the engine takes none.
    campaign_errors(campaign): field errors of a campaign this engine cannot run as set
        (Campaign.clean).
    runnable_errors(campaign): reasons a saved campaign cannot start yet (starting.check_runnable).
    snapshot_extras(campaign): sections a run freezes of the engine beside its parameters,
        e.g. {"fts": {...}} (planning.campaign_snapshot; never secrets).
    categorize(code, message): an error of this engine onto campaigns.choices.ErrorCategory,
        returning (category, errno).
    client_pool: whether a client pool may spread this engine's copies over client hosts.
    sweepable: the sweep axes (campaigns.sweeps.AXES) this engine can honour; None: all of them.
    results_template: a template the run page includes to show the engine's extras of a run.
    copy_mode_error(modes, pairs): why the engine cannot copy these (source URL, destination URL)
        pairs in these asked modes (TpcMode values), or None; None as the entry's value: no
        rule (campaigns.models.engine_rules.copy_mode_error).
    retired_fields: (campaign field of an earlier release, the option of engine_options it is
        now) pairs: the API answers a client still sending one with a 400 naming the option.
    """

    name: str
    label: str
    build_executor: Callable
    drive_task: str = DEFAULT_DRIVE_TASK
    options_form: type | None = None
    campaign_errors: Callable[[Any], dict[str, str]] = _no_errors
    runnable_errors: Callable[[Any], list[str]] = _no_reasons
    snapshot_extras: Callable[[Any], dict[str, Any]] = _no_extras
    categorize: Callable | None = None
    client_pool: bool = True
    sweepable: frozenset[str] | None = None
    results_template: str = ""
    copy_mode_error: Callable[[Any, Any], str | None] | None = None
    retired_fields: tuple[tuple[str, str], ...] = ()


_ENGINES: dict[str, EngineEntry] = {}


def register_engine(entry: EngineEntry) -> EngineEntry:
    """Add an engine; registering a name twice is a mistake unless it is the same entry
    (an engine package imported again)."""
    known = _ENGINES.get(entry.name)
    if known is not None and known != entry:
        raise ValueError(f"An engine named {entry.name!r} is registered already.")
    if len(entry.name) > 10:
        raise ValueError(f"An engine's name is stored in 10 characters: {entry.name!r} is longer.")
    _ENGINES[entry.name] = entry
    return entry


def unregister_engine(name: str) -> None:
    """Remove an engine (a test that registered one of its own cleans up with this)."""
    _ENGINES.pop(name, None)


def engine(name: str) -> EngineEntry:
    """The entry of a registered engine; LookupError names the ones there are."""
    try:
        return _ENGINES[name]
    except KeyError:
        raise LookupError(f"No engine {name!r} is registered (there are {', '.join(_ENGINES) or 'none'}).") from None


def drive_task(name: str | None) -> str:
    """The task a run of this engine is sent to; a run of an engine this deployment no longer
    has goes to the default one, whose driver then fails it saying so."""
    entry = _ENGINES.get(name or "")
    return entry.drive_task if entry else DEFAULT_DRIVE_TASK


def results_template(name: str | None) -> str:
    """The template that shows a run's engine extras on its page ("" for none)."""
    entry = _ENGINES.get(name or "")
    return entry.results_template if entry else ""


def registered() -> tuple[EngineEntry, ...]:
    return tuple(_ENGINES.values())


def engine_choices() -> list[tuple[str, str]]:
    """Campaign.engine's choices, read when a form or a check needs them (a callable, so an
    engine registered later, such as the test suite's toy engine, is a valid choice)."""
    return [(entry.name, entry.label) for entry in _ENGINES.values()]


def clean_options(name: str, options) -> dict:
    """An engine's options validated by its options form, as JSON values (an instance by its
    id); ValidationError with "option: message" lines when they are not valid."""
    form_class = engine(name).options_form
    if not isinstance(options, dict):
        raise ValidationError("The engine's options are a JSON object, e.g. {} for gfal2.")
    if form_class is None:
        if options:
            raise ValidationError(f"The {engine(name).label} engine takes no options (got {', '.join(options)}).")
        return {}
    form = form_class(data=options)
    unknown = sorted(set(options) - set(form.fields))
    if unknown:
        raise ValidationError(f"Unknown options of the {engine(name).label} engine: {', '.join(unknown)}.")
    if not form.is_valid():
        raise ValidationError([f"{key}: {message}" for key, messages in form.errors.items() for message in messages])
    return form.as_options()

"""What the hourly `storageops.retention` task runs: each app's retention, registered by it.

storageops is the bottom floor and imports no app; an app whose data ages out registers its
pass in its AppConfig.ready() by dotted path (imported when the task runs, not at start-up).
"""

from __future__ import annotations

from django.utils.module_loading import import_string

_passes: dict[str, str] = {}


def register(label: str, dotted_path: str) -> None:
    """`dotted_path` names a function taking no argument and returning a report (a dict)."""
    _passes[label] = dotted_path


def apply() -> dict:
    """Run every registered pass, in registration order: {label: its report}."""
    return {label: import_string(path)() for label, path in _passes.items()}

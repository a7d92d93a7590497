"""What an engine records of a transfer beyond the common columns, kept in a table of the
engine's own app (one row per transfer, a one-to-one to Transfer) and shown beside them.

Transfer holds what every engine records; an engine that says more of a copy (FTS: the job
and file ids FTS gave it) keeps it in its own table and registers its columns here when its
app is ready. The exports and the API then read them through the registry, so that campaigns
names no engine's table: a join when a run's transfers are read (`lookup`, which
`values_list` and `select_related` follow), and the column's name, which readers of the
exports and the API know it by.

It lives in the bottom room, beside the engine registry, so that results (the exports) and
the API may ask it; it imports nothing of the project.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ObjectDoesNotExist


@dataclass(frozen=True)
class ExtraColumn:
    """One column an engine adds to a transfer's exports and API representation.

    name: the column's name in the exports and the API ("fts_job_id").
    lookup: the path from Transfer to its value, through the engine's one-to-one
        ("fts__job_id": Transfer.fts, then its job_id).
    empty: what a transfer the engine recorded nothing of shows ("" or None).
    kind: the type of its values, str or int, which the API's schema documents.
    help_text: what the column holds, for the API's schema.
    """

    name: str
    lookup: str
    empty: Any = None
    kind: type = str
    help_text: str = ""

    @property
    def relation(self) -> str:
        return self.lookup.split("__", 1)[0]

    def value_of(self, transfer) -> Any:
        """The column's value for one Transfer (its relation read with select_related)."""
        value = transfer
        for part in self.lookup.split("__"):
            try:
                value = getattr(value, part)
            except ObjectDoesNotExist:
                return self.empty
            if value is None:
                return self.empty
        return value

    def shown(self, value: Any) -> Any:
        """A value read with `lookup` in values_list: None where the engine holds no row."""
        return self.empty if value is None else value


_COLUMNS: dict[str, ExtraColumn] = {}


def register(*columns: ExtraColumn) -> None:
    """Add an engine's columns, in the order they are shown; the same column again is a no-op
    (an app made ready twice in a test run), another one under a known name a mistake."""
    for column in columns:
        known = _COLUMNS.get(column.name)
        if known is not None and known != column:
            raise ValueError(f"A transfer column named {column.name!r} is registered already.")
        _COLUMNS[column.name] = column


def columns() -> tuple[ExtraColumn, ...]:
    return tuple(_COLUMNS.values())


def relations() -> tuple[str, ...]:
    """The one-to-one relations of Transfer the registered columns read (for select_related)."""
    return tuple(dict.fromkeys(column.relation for column in _COLUMNS.values()))

"""What an engine adds to a verdict: a note on why its steps did not run as asked, and what to change.

Some engines hold a step below its concurrency for reasons of their own that the storage has no
part in (FTS applies a link limit only at its optimizer's next pass, and starts queued files only
at its scheduler's). The verdict says so in a row of its own, and a run list marks such a run, so
a run that "succeeded" at a figure its engine held down is not read as the storage's answer.

The engine's app registers its notes when it is ready (campaigns.runs.engines.fts.apps); the
verdict asks each registered note of every run, and a note answers None for a run it has nothing
to say of (another engine's). The results never name an engine.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from campaigns.models import Run


@dataclass(frozen=True)
class EngineNote:
    """key: where the verdict stores the note's figures (kept as stored: a run judged earlier is
    said again from them). row: the statement's key, and the page row's `data-verdict-row`.
    title: the row's title on a page. label: what a run list shows beside the run's state.
    find(run, steps): the figures, or None. sentence(figures): the row's text."""

    key: str
    row: str
    title: str
    label: str
    find: Callable[[Run, list[dict]], dict | None]
    sentence: Callable[[dict], str]


_notes: dict[str, EngineNote] = {}


def register(*notes: EngineNote) -> None:
    """Add notes; the first registered is the first said and the one a run list marks first.
    Registering a key again replaces its note (an app's ready() may run twice in tests)."""
    for note in notes:
        _notes[note.key] = note


def registered() -> tuple[EngineNote, ...]:
    return tuple(_notes.values())


def find_all(run: Run, steps: list[dict]) -> dict[str, dict | None]:
    """{key: figures or None} of every registered note, for the verdict to store."""
    return {note.key: note.find(run, steps) for note in registered()}


def said(verdict: dict) -> list[tuple[EngineNote, str]]:
    """The notes a stored verdict holds figures for, each with its sentence, in registered order."""
    return [(note, note.sentence(verdict[note.key])) for note in registered() if verdict.get(note.key)]

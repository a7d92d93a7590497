"""An engine's note in a verdict: registered by the engine's app, said in its own row, marked on
run lists, and kept when a stored verdict is said again. The results name no engine."""

from __future__ import annotations

import pytest

from campaigns.results import engine_notes, verdicts

STEPS = [{"step": 0, "concurrency": 4, "achieved_mean": 1.0}]
CURVE = {"knee": {"concurrency": 4, "throughput_bps": 1e6}, "peak": {"concurrency": 4, "throughput_bps": 1e6}}


def _toy_note(found: dict | None) -> engine_notes.EngineNote:
    return engine_notes.EngineNote(
        key="toy_queue", row="toy", title="Toy queue", label="toy queue held it",
        find=lambda run, steps: found, sentence=lambda f: f"Toy queue held ×{f['concurrency']}.",
    )  # fmt: skip


@pytest.fixture
def toy(monkeypatch):
    """A note of an engine the results have never heard of, registered as an app registers one."""
    monkeypatch.setattr(engine_notes, "_notes", dict(engine_notes._notes))
    engine_notes.register(_toy_note({"concurrency": 4}))
    return engine_notes.registered()[-1]


def test_the_fts_app_registers_its_notes_in_the_order_they_are_said():
    assert [n.key for n in engine_notes.registered()][:2] == ["link_limit", "scheduling_gap"]
    titles = {n.row: n.title for n in engine_notes.registered()}
    assert titles["link_limit"] == "Link limit" and titles["scheduling"] == "Scheduling"


def test_a_registered_note_is_found_stored_said_marked_and_shown(toy):
    class Run:  # the note's find reads nothing of it
        snapshot: dict = {}

    found = engine_notes.find_all(Run(), STEPS)
    assert found["toy_queue"] == {"concurrency": 4}
    assert found["link_limit"] is None and found["scheduling_gap"] is None  # not an FTS run's snapshot
    verdict = {"status": "levelled", "off_target": [], "samples_used": 0, "headline": "", **found, **CURVE}
    said = verdicts.statements(verdict)
    assert said["toy"] == "Toy queue held ×4."
    assert verdicts.mark(verdict) == {"key": "toy_queue", "label": "toy queue held it", "css": "partial",
                                      "title": "Toy queue held ×4."}  # fmt: skip
    view = verdicts.view(verdict)
    assert {"row": "toy", "title": "Toy queue", "text": "Toy queue held ×4."} in view["notes"]
    assert "Toy queue held ×4." in view["headline"]


def test_a_verdict_with_no_data_says_no_note_and_marks_nothing(toy):
    verdict = {"status": "no_data", "off_target": [], "samples_used": 0, "headline": ""}
    verdict["toy_queue"] = {"concurrency": 4}
    assert "toy" not in verdicts.statements(verdict)
    assert verdicts.mark(verdict) is None


def test_a_stored_verdict_of_an_engine_no_longer_installed_is_said_without_its_note():
    """A run judged when an engine was installed keeps the note's figures; with the engine gone,
    the page says the rest and does not fail on a key nobody registers."""
    verdict = {
        "status": "levelled",
        "off_target": [],
        "samples_used": 0,
        "headline": "",
        "gone_engine": {"x": 1},
        **CURVE,
    }
    view = verdicts.view(verdict)
    assert view["notes"] == [] and verdicts.mark(verdict) is None

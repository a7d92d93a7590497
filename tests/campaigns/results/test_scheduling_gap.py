"""The scheduling gap on its own: the refill gap read from copies' times and durations, FTS's
scheduler simulated pass by pass, the verdict's sentence and the run list's mark, and how many
files the FTS executor keeps queued ahead once FTS holds a step."""

from __future__ import annotations

import math

import pytest

from campaigns.results import refill_gap, verdicts
from campaigns.runs.engines.fts import scheduling_gap
from campaigns.runs.engines.fts.executor import FtsExecutor


def fts_slot(copy: float, interval: float, copies: int, phase: float = 0.3) -> list[refill_gap.Copy]:
    """One slot under FTS's scheduler: each copy starts at the first pass after the one before it
    ended, and is recorded as FTS records it: start and finish to the whole second, the duration exact."""
    out, at = [], phase
    for _ in range(copies):
        end = at + copy
        out.append((float(math.floor(at)), float(math.floor(end)), copy))
        at = phase + math.ceil((end - phase) / interval) * interval  # the next pass
    return out


def test_a_2_5_s_copy_under_a_2_s_pass_idles_its_slot_1_5_s_whatever_the_pass_phase():
    for phase in (0.1, 0.3, 0.6, 0.9):
        figures = refill_gap.figures(fts_slot(2.5, 2.0, 10, phase))
        assert figures == {"gap_seconds": 1.5, "gaps": 9}, phase  # the whole-second finish read 1 or 2 s


def test_the_gap_counts_from_the_measurement_start_and_a_tail_end_is_none():
    copies = [(0.0, 2.0, 2.0), (3.0, 5.0, 2.0), (6.0, 8.0, 2.0)]
    assert refill_gap.refill_gaps(copies) == [1.0, 1.0]  # the last end: no start after it
    assert refill_gap.refill_gaps(copies, since=4.0) == [1.0]
    # Two slots: each end paired with the earliest start not yet taken.
    two = [(0.0, 2.0, 2.0), (0.0, 3.0, 3.0), (2.0, 4.0, 2.0), (4.0, 6.0, 2.0)]
    assert refill_gap.refill_gaps(two) == [0.0, 1.0]
    assert refill_gap.figures([]) == {"gap_seconds": None, "gaps": 0}


def test_why_nine_passes_a_copy_of_four_passes_may_run_at_0_8():
    """A slot idles P - (L mod P) after each copy: at L = 4 passes a copy ending just after a pass
    leaves its slot 20 % empty; at 9 passes, never more than 10 %."""
    for multiple in (4.05, 9.05):
        gap = refill_gap.figures(fts_slot(multiple * 2.0, 2.0, 8))["gap_seconds"]
        share = multiple * 2.0 / (multiple * 2.0 + gap)
        assert (share < 0.9) if multiple < scheduling_gap.GAP_MULTIPLE else (share >= 0.9), (multiple, gap, share)


def step(index: int, target: int, achieved: float, copy: float, gap: float | None, **extra) -> dict:
    return {"step": index, "concurrency": target, "achieved_mean": achieved, "achieved_max": target,
            "off_target": abs(achieved - target) / target > 0.1, "duration_p50": copy, "gap_seconds": gap,
            "gaps": 10 if gap is not None else None, "files_ok": 20, "bytes": 20 * 64 * 2**20,
            "throughput_bps": 25e6 * achieved, **extra}  # fmt: skip


# What a real FTS 3.14.4 did with 64-MiB copies of 2.5 s under its 2-s pass.
REAL = [step(0, 1, 0.65, 2.5, 1.5), step(1, 2, 1.46, 2.5, 1.5), step(2, 4, 2.81, 2.5, 1.4)]


def test_the_gap_explains_steps_below_target_with_short_copies_and_says_what_to_change():
    found = scheduling_gap.explain(REAL, 2.0, assumed=True, queue_ahead=True)
    assert [f["step"] for f in found["steps"]] == [0, 1, 2]
    # 64 MiB in 2.5 s: 9 passes of 2 s need 483 MB files.
    assert found["min_file_bytes"] == math.ceil(64 * 2**20 * 18 / 2.5 / 1e6) * 10**6 == 484 * 10**6
    text = scheduling_gap.sentence(found)
    assert text.startswith(
        "Scheduling gap: copies of 2.5 s are shorter than 9 × FTS's default 2-s scheduling pass "
        "(SchedulingInterval): slots idle 1.5 s after each copy (×1 ran at 0.65, ×2 at 1.46, ×4 at 2.81); "
        "use larger files (≥ 484 MB), or lower the instance's SchedulingInterval (below 0.3 s)."
    ), text
    assert "assumed to be FTS's default 2 s" in text and "queue more files" not in text
    # Without link limits StorageOps held at most the concurrency in FTS: no file was queued for the pass.
    said = scheduling_gap.sentence(scheduling_gap.explain(REAL, 3.0, assumed=False, queue_ahead=False))
    assert "the instance's 3-s scheduling pass" in said and "or queue more files per link" in said
    assert "assumed" not in said


@pytest.mark.parametrize(
    "steps",
    [
        [step(0, 4, 3.9, 2.5, 0.1)],  # on target
        [step(0, 4, 2.0, 20.0, 1.0)],  # copies long against the pass: the gap is not why
        [step(0, 4, 2.0, 2.5, 6.0)],  # idle far longer than a pass: something else held it
        [step(0, 4, 2.0, 2.5, 0.05)],  # no idle time to speak of (a gfal2 thread, a slow door)
        [step(0, 4, 2.0, 2.5, None)],  # a summary without the figure
        [step(0, 2, 2.6, 2.5, 1.5)],  # above its target
    ],
)
def test_what_the_gap_does_not_explain(steps):
    assert scheduling_gap.explain(steps, 2.0, assumed=True, queue_ahead=True) is None


def test_the_verdict_row_and_the_run_lists_mark():
    gap = scheduling_gap.explain(REAL, 2.0, assumed=True, queue_ahead=True)
    verdict = {"status": "inconclusive", "off_target": [], "samples_used": 0, "scheduling_gap": gap,
               "headline": ""}  # fmt: skip
    said = verdicts.statements(verdict)
    assert list(said)[:2] == ["curve", "scheduling"] and said["scheduling"] == scheduling_gap.sentence(gap)
    assert verdicts.mark(verdict) == {"key": "scheduling_gap", "label": "scheduling gap", "css": "partial",
                                      "title": said["scheduling"]}  # fmt: skip
    assert verdicts.mark({**verdict, "scheduling_gap": None})["key"] == "inconclusive"
    assert verdicts.mark({"status": "levelled", "off_target": [], "scheduling_gap": None}) is None


class _Executor(FtsExecutor):
    def __init__(self, *, manage: bool, in_force: bool, links: int, batch: int, outstanding: int) -> None:
        self.manage_links, self.in_force, self.batch_size = manage, in_force, batch
        self.links = [("root://a", f"root://b{n}") for n in range(links)]
        self._outstanding = outstanding

    def outstanding(self) -> int:
        return self._outstanding


def test_fts_is_fed_a_job_or_a_step_ahead_per_link_once_it_holds_the_step():
    # Before the pinned limit is in force, or without link limits: at most the concurrency in FTS.
    assert _Executor(manage=True, in_force=False, links=1, batch=4, outstanding=1).room(2) == 1
    assert _Executor(manage=False, in_force=True, links=1, batch=4, outstanding=0).room(2) == 2
    # Then a job's worth queued per link, at least the step's concurrency (every slot may free up).
    assert _Executor(manage=True, in_force=True, links=1, batch=4, outstanding=2).room(2) == 4
    assert _Executor(manage=True, in_force=True, links=1, batch=4, outstanding=8).room(8) == 8
    assert _Executor(manage=True, in_force=True, links=2, batch=4, outstanding=0).room(2) == 10

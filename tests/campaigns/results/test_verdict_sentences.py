"""A verdict never contradicts itself, and one read from off-target steps says so.

Every kind of verdict (its curve's status, then what it says of saturation: the pairs listed in
docs/verdicts.md) is built here by the real verdict on hand-made steps and collector samples,
then rendered by the run page's partial: its headline and its rows must say the same thing. A
site once read "Saturation unknown ... not enough samples" in a headline above a Bottleneck row
saying "none at or before the knee".
"""

from __future__ import annotations

import html as html_lib
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.template.loader import render_to_string

from campaigns import runs
from campaigns.models import RunStep
from campaigns.results import verdicts
from collectors.models import Host, MetricSample
from tests.support.factories import campaign, endpoint

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
STEP = 10  # seconds
DOCS = Path(__file__).resolve().parents[3] / "docs" / "verdicts.md"

# Curves: concurrencies, throughputs, and the achieved mean in flight of each step (None: on target).
CURVES = {
    "levelled": ([1, 2, 4], [100e6, 200e6, 205e6], None),
    "still_rising": ([1, 2, 4], [100e6, 150e6, 250e6], None),
    "single_step": ([4], [100e6], None),
    "no_data": ([1, 2], [None, 0], None),
    # Through FTS, as a site measured it: no step had its concurrency in flight.
    "inconclusive": ([1, 2, 4], [10.2e6, 20.5e6, 38.3e6], [0.64, 1.28, 1.48]),
}
# Causes: the door's cpu.percent samples per step (a list per step), and overload errors in step 0.
CAUSES = {
    "bottleneck": ([95, 95], False),
    # Full at the first step only: the curve rose after it (or, one step, no curve to read).
    "near_limit": ("first", False),
    # The destination idle, the source door full at every step.
    "far_side": ("source", False),
    "no_samples": (None, False),
    "thin_samples": ("thin", False),
    "overload_only": ([30, 30], True),
    "nothing_yet": ([30, 30], False),
    "elsewhere": ([30, 30], False),
    "not_judged": ([95, 95], False),
}


def possible() -> set[tuple[str, str]]:
    """The (status, cause) pairs a verdict can be: without a knee (no data, inconclusive) no
    bottleneck is judged; with one, "nothing saturated" is "yet" on a curve still rising."""
    pairs = {(status, "not_judged") for status in ("no_data", "inconclusive")}
    for status in ("levelled", "still_rising", "single_step"):
        quiet = "nothing_yet" if status == "still_rising" else "elsewhere"
        pairs |= {(status, cause) for cause in ("near_limit", "no_samples", "thin_samples", "overload_only", quiet)}
    # A bottleneck needs a knee with a plateau after it: a curve that levelled.
    return pairs | {("levelled", "bottleneck"), ("levelled", "far_side")}


KINDS = sorted(possible())


@pytest.fixture
def door(db) -> Host:
    return Host.objects.create(name="door-s", link_speed_bps=10_000_000_000, sample_interval=1)


def build(door: Host, status: str, cause: str) -> dict:
    concurrencies, throughputs, achieved = CURVES[status]
    src = endpoint("s-src", "mock://src.test/data/")
    dst = endpoint("s-dst", "mock://dst.test/data/")
    dst.hosts.set([door])
    cpu, overload = CAUSES[cause]
    if cpu == "source":
        src.hosts.set([Host.objects.create(name="door-src", sample_interval=1)])
    obj = campaign("sentences", [src], [dst], concurrency_steps=concurrencies, step_seconds=STEP)
    run = runs.create_run(obj)
    steps = []
    for i, (c, t) in enumerate(zip(concurrencies, throughputs, strict=True)):
        start = T0 + timedelta(seconds=i * STEP)
        RunStep.objects.create(
            run=run, index=i, concurrency=c, started_at=start, ended_at=start + timedelta(seconds=STEP)
        )
        row = {"step": i, "concurrency": c, "throughput_bps": t, "files_ok": 100, "files_failed": 0, "errors": {}}
        if achieved:
            row.update(achieved_mean=achieved[i], achieved_max=c, off_target=True)
        if overload and i == 0:
            row.update(files_ok=90, files_failed=10, errors={"checksum_timeout": 10})
        steps.append(row)
        if cpu == "thin":
            values = [30] if i == 0 else [30, 30]
        elif cpu == "first":
            values = [95, 95] if i == 0 else [30, 30]
        elif cpu == "source":
            values = [30, 30]
            MetricSample.objects.bulk_create(
                MetricSample(host=src.hosts.get(), metric="cpu.percent", time=start + timedelta(seconds=2 + 3 * k),
                             value=95)
                for k in range(2)
            )  # fmt: skip
        else:
            values = cpu
        if values:
            MetricSample.objects.bulk_create(
                MetricSample(host=door, metric="cpu.percent", time=start + timedelta(seconds=2 + 3 * k), value=v)
                for k, v in enumerate(values)
            )
    summary = {"steps": steps, "doors": {door.name: {}}}
    return verdicts.run_verdict(run, summary, T0 + timedelta(seconds=STEP * len(steps)))


def rendered(verdict: dict) -> tuple[str, dict[str, str], str]:
    """The headline, the rows (label -> text) and the badge's class of the rendered partial."""
    page = render_to_string("campaigns/partials/verdict.html", {"verdict": verdict})
    head = re.search(
        r'<p class="verdict-headline"[^>]*><span class="badge badge-(\w+)">[^<]*</span>\s*(.*?)</p>', page, re.S
    )
    rows = dict(re.findall(r"<dt>([^<]+)</dt><dd[^>]*>(.*?)</dd>", page, re.S))
    text = {k: html_lib.unescape(re.sub(r"<[^>]+>", "", v)).strip() for k, v in rows.items()}
    return html_lib.unescape(head.group(2)).strip(), text, head.group(1)


def test_every_kind_is_listed_in_the_docs_and_the_module():
    assert set(CURVES) == set(verdicts.STATUSES) and set(CAUSES) == set(verdicts.CAUSES)
    docs = DOCS.read_text()
    for status, cause in KINDS:
        assert f"| `{status}` | `{cause}` |" in docs, (status, cause)


@pytest.mark.parametrize(("status", "cause"), KINDS)
def test_the_headline_and_the_rows_say_the_same(door, status, cause):
    verdict = build(door, status, cause)
    assert verdicts.kind(verdict) == (status, cause), verdict["headline"]
    said = verdicts.statements(verdict)
    assert verdict["headline"] == " ".join(said.values()) == verdicts.headline(verdict)
    headline, rows, badge = rendered(verdict)
    print(f"{status} / {cause}: {headline}")
    assert headline == verdict["headline"]
    # A verdict describes a curve: its badge is never the green of a run that succeeded.
    assert badge != "succeeded"
    bottleneck = rows["Bottleneck"]
    assert bottleneck == verdicts.view(verdict)["cause"]
    if verdict["bottleneck"]:
        b = verdict["bottleneck"]
        assert bottleneck == said["bottleneck"].removeprefix("Bottleneck: ") and bottleneck in headline
        assert b["title"] in bottleneck
        assert f"from concurrency {b['concurrency']}" in bottleneck
    elif cause == "not_judged":
        # No knee: the row says so, and the headline names no bottleneck and no saturation.
        assert bottleneck.startswith("Not judged")
        assert "Bottleneck" not in headline and "saturated" not in headline.lower()
    else:
        assert bottleneck == said["bottleneck"].removeprefix("Bottleneck: ") and bottleneck in headline
    if "Concurrency" in rows:
        assert rows["Concurrency"] in headline
    if verdict["knee"]:
        c = verdict["knee"]["concurrency"]
        assert f"concurrency {c}" in headline or f"One concurrency only ({c}," in headline
        # The Knee row agrees with the curve's sentence: a curve still rising has not reached one.
        knee_row = {"still_rising": "not reached (still rising at ×", "single_step": "not found (one concurrency"}
        assert rows["Knee"].startswith(knee_row.get(status, f"concurrency {c} — ")), rows["Knee"]
    else:
        assert "Knee" not in rows and "Knee at" not in headline
    if "Capacity" in rows:
        # Per door at the knee only where there is one; a curve still rising says where it was read.
        still = "at the last step (×" in rows["Capacity"] and "the knee not reached" in rows["Capacity"]
        assert still == (status == "still_rising") and ("at the knee" in rows["Capacity"]) != still, rows["Capacity"]


def test_a_sweep_all_off_target_is_inconclusive_with_the_reason(door):
    verdict = build(door, "inconclusive", "not_judged")
    assert verdict["status"] == "inconclusive"
    assert verdict["knee"] is None and verdict["capacity"] is None and verdict["bottleneck"] is None
    assert verdict["headline"].startswith(
        "Inconclusive: no step ran at its target concurrency (×1 ran at 0.64 (max 1), ×2 at 1.28 (max 2), "
        "×4 at 1.48 (max 4) copies in flight on average, more than 10 % off)"
    ), verdict["headline"]
    # What it was once called from the same steps: "knee at concurrency 4, still rising".
    assert "still rising" not in verdict["headline"].lower() and "Knee" not in verdict["headline"]


def _curve(targets, achieved, throughputs):
    return [
        {"step": i, "concurrency": c, "throughput_bps": t, "achieved_mean": m, "achieved_max": c,
         "off_target": abs(m - c) / c > 0.10}
        for i, (c, m, t) in enumerate(zip(targets, achieved, throughputs, strict=True))
    ]  # fmt: skip


def test_the_curve_is_read_at_the_concurrency_achieved():
    # The step of 4 fell back to 1.5 in flight. Read at the targets, the curve peaks at 2 and
    # levels off; read at what ran, it never got past 2 and is still rising there.
    steps = _curve([1, 2, 4], [1.0, 2.0, 1.5], [100e6, 200e6, 160e6])
    on_targets = [{k: v for k, v in s.items() if not k.startswith(("achieved", "off"))} for s in steps]
    assert verdicts.knee(on_targets)["status"] == "levelled"
    curve = verdicts.knee(steps)
    assert curve["status"] == "still_rising" and curve["knee"]["concurrency"] == 2


def test_a_verdict_resting_on_an_off_target_step_says_so_in_its_headline(door):
    src = endpoint("m-src", "mock://src.test/data/")
    dst = endpoint("m-dst", "mock://dst.test/data/")
    run = runs.create_run(campaign("mixed", [src], [dst], concurrency_steps=[1, 2, 4, 8], step_seconds=STEP))
    summary = {"steps": _curve([1, 2, 4, 8], [1.0, 1.98, 3.2, 7.9], [100e6, 190e6, 300e6, 310e6]), "doors": {}}
    verdict = verdicts.run_verdict(run, summary, T0)
    assert verdict["status"] == "levelled" and verdict["knee"]["concurrency"] == 4
    assert verdict["off_target"] == [{"step": 2, "concurrency": 4, "achieved_mean": 3.2, "achieved_max": 4}]
    assert verdict["headline"].startswith("Knee at concurrency 4 (ran at 3.20) (300 MB/s"), verdict["headline"]
    assert (
        "Off target: ×4 ran at 3.20 (max 4) copies in flight on average, more than 10 % from its target"
        in (verdict["headline"])
    )
    headline, rows, _ = rendered(verdict)
    assert rows["Concurrency"] in headline and "(ran at 3.20)" in rows["Knee"]


def test_a_step_that_ran_at_an_earlier_steps_concurrency_does_not_name_the_knee():
    # Sweep 1, 2, 4 with 2 files left for the step of 4 (tests/dashboard/test_achieved_concurrency):
    # it ran at 1.98, a hair under the step of 2, with the same throughput.
    steps = _curve([1, 2, 4], [1.0, 1.999, 1.98], [1.0e3, 1.99e3, 1.95e3])
    curve = verdicts.knee(steps)
    assert curve["knee"]["concurrency"] == 2 and curve["status"] == "still_rising"

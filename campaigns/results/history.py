"""A campaign's runs over time, each beside the band it was judged against, with the change-log
events of its scope: the campaign page's history chart.

Each point is what the run achieved on one figure and the band is the one stored with the run's
judgement when it ended (not recomputed): a band drawn today from today's history would hide
what the run was told. Every ended run is a point, those not counted in later baselines
(partial, disturbed, retries, left out by an operator) included and marked with why, since a
run left out of the baselines still happened.
"""

from __future__ import annotations

from datetime import UTC, datetime

from campaigns.choices import FINAL_RUN_STATES, RunState
from campaigns.models import Campaign, Run
from campaigns.results import baseline_choice
from campaigns.results.baselines import FIGURES, figures_of
from campaigns.results.charts import event_mark
from campaigns.results.disturbance import touching
from collectors.choices import DISTURBING_KINDS
from collectors.models import Event

HISTORY_RUNS = 100
HISTORY_EVENTS = 50


def _ended_runs(campaign: Campaign, limit: int) -> list[Run]:
    ended = [s for s in FINAL_RUN_STATES if s != RunState.CANCELLED]
    newest = (
        Run.objects.filter(campaign=campaign, state__in=ended, finished_at__isnull=False)
        .select_related("baseline_chosen_by")
        .only(
            "pk",
            "state",
            "finished_at",
            "started_at",
            "created",
            "disturbed",
            "summary",
            "campaign_id",
            "retry_of_id",
            "baseline_choice",
            "baseline_reason",
            "baseline_chosen_by__username",
        )
        .order_by("-finished_at")[:limit]
    )
    return list(reversed(newest))


def figure_choices(per_run: list[dict]) -> list[dict]:
    """The figures any of the runs has (each run's figures_of), the fixed ones first, then each
    step's throughput."""
    found: dict[str, str] = {}
    for figures in per_run:
        for key, (figure, _) in figures.items():
            found.setdefault(key, figure.label)
    fixed = [f.key for f in FIGURES]
    steps = sorted((k for k in found if k not in fixed), key=lambda k: int(k.rsplit("_", 1)[1]))
    return [{"key": k, "label": found[k]} for k in [*fixed, *steps] if k in found]


def campaign_history(campaign: Campaign, figure: str = "throughput", limit: int = HISTORY_RUNS) -> dict:
    runs = _ended_runs(campaign, limit)
    per_run = [figures_of(run.summary or {}) for run in runs]
    unit = next((f.unit for f in FIGURES if f.key == figure), "B/s")
    points = []
    for run, figures in zip(runs, per_run, strict=True):
        value = figures.get(figure)
        if value is None:
            continue
        judgement = (run.summary or {}).get("judgement") or {}
        band = next((f for f in judgement.get("figures") or [] if f["key"] == figure), None)
        standing = baseline_choice.standing(run)
        points.append({
            "run": run.pk, "url": run.get_absolute_url(), "x": run.finished_at.timestamp() * 1000, "y": value[1],
            "state": run.state, "disturbed": run.disturbed, "judgement": judgement.get("status", ""),
            "figure_status": band["status"] if band else "", "headline": judgement.get("headline", ""),
            "low": band["low"] if band else None, "high": band["high"] if band else None,
            "median": band["median"] if band else None,
            "counted": standing["counted"], "baseline_why": standing["why"],
            "ongoing_since": (judgement.get("ongoing") or {}).get("since"),
            "suspect": _first_suspect(judgement),
        })  # fmt: skip
    return {
        "campaign": campaign.pk,
        "figure": figure,
        "unit": unit,
        "figures": figure_choices(per_run),
        "points": points,
        "events": _events(runs),
    }


def _first_suspect(judgement: dict) -> str:
    """The newest change a regression named, in the words of the run page's suspects list."""
    first = (judgement.get("suspects") or [None])[0]
    if not first:
        return ""
    return f"{first['time'][:16].replace('T', ' ')} {first['kind'].replace('_', ' ')} on {first['where']}"


def baseline_table(campaign: Campaign, limit: int = HISTORY_RUNS) -> dict:
    """Each ended run's throughput beside the band it was judged with, its judgement, whether later
    baselines count it and why, and its suspect: the campaign page's and the history report's table."""
    shown = campaign_history(campaign, "throughput", limit)
    rows = [{**p, "ended": datetime.fromtimestamp(p["x"] / 1000, UTC)} for p in shown["points"]]
    return {"rows": rows, "unit": shown["unit"], "history": shown}


def watch(campaign: Campaign, recent: list[Run] | None = None, complete: bool = False) -> dict | None:
    """The campaign's latest judged run in words for its page, with since when a regression has
    lasted: {"run", "status", "headline", "since", "runs"}; None before any run was judged.

    `recent`: runs the page has loaded already (newest first); the latest judged one is read from
    them without a query, and the database is asked only when none of them was judged and older
    runs may exist (`complete` False: `recent` is a slice of the campaign's runs)."""
    judged = [
        (run.finished_at, run.pk, run.summary["judgement"])
        for run in recent or ()
        if run.finished_at and isinstance(run.summary, dict) and (run.summary.get("judgement") or {}).get("status")
    ]
    if judged:
        _, pk, judgement = max(judged, key=lambda item: item[0])
    elif recent is not None and complete:
        return None
    else:
        latest = (
            Run.objects.filter(campaign=campaign, finished_at__isnull=False, summary__judgement__status__isnull=False)
            .order_by("-finished_at")
            .values_list("pk", "summary__judgement")
            .first()
        )
        if latest is None:
            return None
        pk, judgement = latest
    ongoing = judgement.get("ongoing") or ({"since": pk, "runs": 1} if judgement.get("status") == "regressed" else {})
    return {"run": pk, "status": judgement.get("status", ""), "headline": judgement.get("headline", ""),
            "since": ongoing.get("since"), "runs": ongoing.get("runs")}  # fmt: skip


def _events(runs: list[Run]) -> list[dict]:
    """The disturbing events of the campaign's scope (as its latest run saw it) over the runs' span."""
    if not runs:
        return []
    first = runs[0].started_at or runs[0].created
    events = (
        Event.objects.filter(touching(runs[-1]), kind__in=DISTURBING_KINDS, time__gte=first)
        .select_related("host")
        .order_by("-time", "-pk")[:HISTORY_EVENTS]
    )
    return [event_mark(e) for e in reversed(events)]

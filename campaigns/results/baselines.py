"""A finished run judged against its own history: the regression watch.

The baseline of a run is the campaign's latest comparable runs before it, with the same frozen
parameters (what a comparison lines up), at most BASELINE_RUNS of them and at least
MIN_BASELINE_RUNS. Comparable by the rule: succeeded, not disturbed, not a retry (a retry
re-drives only what another run did not finish, a few files that say nothing of a night).
An operator may include a partial or disturbed run known to be sound, or leave out a night
known to be unrepresentative (baseline_choice.py); a retry is never comparable, and is not
judged. Each figure gets a noise band from their spread: the median, and a half-width of a
99 % prediction interval for one more run, t(n-1) x sqrt(1 + 1/n) robust standard deviations
(1.4826 times the median absolute deviation, or 1.2533 times the mean absolute deviation where
that is larger: see band). Few runs tell little about their spread: on a real door under a
quota, three runs of 368, 375 and 403 MB/s (a MAD of 7) were followed by a fourth at 416, 11 % above
their median, and a fixed 3 sigma band called that "better"; Student's t widens the band
for three runs (11 sigma) and narrows it as the history grows (3.4 sigma for ten). It is
never narrower than a floor (REL_FLOOR of the median for throughputs and times,
ABS_RATE_FLOOR for rates), since three quiet runs can agree to the byte and a band of zero
width calls every run a change.

A percentile is a figure only with enough copies under it: the p95 of 16 copies is their
second slowest, and one copy slowed by the machine moved it 25 % on a real door whose
throughput stayed within its band. The p95 copy time is judged from P95_MIN_COPIES copies on
(five or more above it), in the run and in each baseline run.

A figure outside its band is improved or regressed by its direction (throughput up is
better; latency and failure rates down); the run is regressed if any figure is, improved if
some figure is and none regressed, else within. Each figure says by how much (percent of
the median) and how sure (how many robust standard deviations from the median). The
disturbing events of the run's scope since the newest baseline run are named as suspects.

A noisy site: with three to five runs whose spread is real (±19 % around 23 MB/s) the
t-widened band reached down to 6 % of the median, and a run at -90 % was "within" and then joined
the baseline, whose band no run could fail after it. So the band's half-width is capped at the
campaign's regression threshold (default 50 % of the median, as MaDDash lets a site set one): a
change beyond that share of the median is outside the band however wide the spread, a drop of
throughput a regression. And a run the band held though it lies far below the baseline's robust
level (FAR_SIGMAS robust standard deviations and at least FAR_MIN_CHANGE of the median, on the
worse side) is kept out of later baselines like a regressed run: it cannot widen the band by
itself. An operator includes it, or accepts it as the new normal, when it is the door's level.

A baseline holds its level: a run judged regressed is left out of later baselines
(unless an operator includes it), else a lasting slowdown joins the history it is judged
against, widens the band until it reads "within", and moves the suspects' window past the
change. A run still regressed after a regressed run is the same regression, "ongoing since"
its first run, with that run's suspects; the first run back within its band is "recovered".
A real, intended change is accepted as the new normal from a run on (BaselineChoice.NEW_NORMAL):
later baselines start at that run, and the runs from it on count whatever they were told
against the level before it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Q

from campaigns.choices import BaselineChoice, ErrorCategory, RunState
from campaigns.models import Campaign, Run
from campaigns.results.comparison import parameters
from campaigns.results.disturbance import touching
from campaigns.results.scope import run_window
from collectors.choices import DISTURBING_KINDS
from collectors.models import Event
from collectors.references import attach

BASELINE_RUNS = 10
MIN_BASELINE_RUNS = 3
# Student's t, two-sided 99 %, by degrees of freedom (n - 1 for n baseline runs).
T_99 = {2: 9.925, 3: 5.841, 4: 4.604, 5: 4.032, 6: 3.707, 7: 3.499, 8: 3.355, 9: 3.250}
MAD_TO_SIGMA = 1.4826
MEAN_AD_TO_SIGMA = 1.2533  # sqrt(pi / 2): the mean absolute deviation of a normal sample to its sigma
REL_FLOOR = 0.05
ABS_RATE_FLOOR = 0.01
SUSPECTS = 5
P95_MIN_COPIES = 100
DEFAULT_THRESHOLD = 0.5  # Campaign.regression_threshold's default, as a share of the median
FAR_SIGMAS = 4.0
FAR_MIN_CHANGE = 0.10


@dataclass(frozen=True)
class Figure:
    key: str
    label: str
    value: Callable[[dict], float | None]
    higher_is_better: bool
    unit: str = "B/s"  # B/s, s, or fraction (a rate: its band's floor is absolute)
    backend: str = ""  # a figure of one backend's copies alone, in a run that worked on several

    @property
    def is_rate(self) -> bool:
        return self.unit == "fraction"


def _total(name: str) -> Callable[[dict], float | None]:
    return lambda summary: (summary.get("total") or {}).get(name)


def _p95(summary: dict) -> float | None:
    total = summary.get("total") or {}
    return total.get("duration_p95") if (total.get("files_ok") or 0) >= P95_MIN_COPIES else None


def _failure_rate(summary: dict, category: str | None = None) -> float | None:
    total = summary.get("total") or {}
    attempted = (total.get("files_ok") or 0) + (total.get("files_failed") or 0)
    if not attempted:
        return None
    failed = total.get("files_failed") or 0 if category is None else (total.get("errors") or {}).get(category, 0)
    return failed / attempted


def _knee(summary: dict) -> float | None:
    # Only a curve that levelled has a knee: a still-rising one's last step is no knee to watch.
    verdict = summary.get("verdict") or {}
    point = verdict.get("knee") or {}
    return point.get("throughput_bps") if verdict.get("status") == "levelled" else None


FIGURES = (
    Figure("throughput", "throughput", _total("throughput_bps"), True),
    Figure("knee_throughput", "throughput at the knee", _knee, True),
    Figure("duration_p95", "p95 copy time", _p95, False, "s"),
    Figure("error_rate", "failure rate", _failure_rate, False, "fraction"),
    Figure(
        "checksum_timeout_rate",
        "checksum-timeout rate",
        lambda s: _failure_rate(s, ErrorCategory.CHECKSUM_TIMEOUT),
        False,
        "fraction",
    ),
)


_RANK = {f.key: i for i, f in enumerate(FIGURES)}


def figures_of(summary: dict) -> dict[str, tuple[Figure, float]]:
    """Every figure a summary has, the per-step throughputs included (keyed by concurrency), and
    with more than one backend on the working side each backend's copy rate and failure rate.
    A backend's own throughput is not judged: its window is paced by the other backends' copies
    sharing the run's slots (EOS slowed to a third stretched dCache's window by half, through the
    real mock plugin, and called dCache regressed), while its copies' rate is its own."""
    found = {f.key: (f, v) for f in FIGURES if (v := f.value(summary)) is not None}
    for step in summary.get("steps") or []:
        if step.get("throughput_bps") is not None and step.get("concurrency"):
            c = step["concurrency"]
            figure = Figure(f"step_throughput_{c}", f"throughput at concurrency {c}", lambda s: None, True)
            found[figure.key] = (figure, step["throughput_bps"])
    backends = summary.get("backends") or {}
    if len(backends) > 1:  # one backend's figures are the run's: judged once
        for name, figures in backends.items():
            for figure in (
                Figure(f"backend_copy_rate:{name}", f"copy rate of {name}", _total("copy_rate_bps"), True,
                       backend=name),
                Figure(f"backend_error_rate:{name}", f"failure rate of {name}", _failure_rate, False, "fraction",
                       backend=name),
            ):  # fmt: skip
                if (value := figure.value({"total": figures})) is not None:
                    found[figure.key] = (figure, value)
    return found


# States an operator may include a run of: a failed or cancelled run's figures are of what
# went wrong, not of the door.
INCLUDABLE_STATES = (RunState.SUCCEEDED, RunState.PARTIAL)
BY_RULE = Q(state=RunState.SUCCEEDED, disturbed=False)
IN_BASELINE = Q(retry_of__isnull=True) & (
    (BY_RULE & ~Q(baseline_choice=BaselineChoice.EXCLUDE))
    | Q(baseline_choice__in=(BaselineChoice.INCLUDE, BaselineChoice.NEW_NORMAL), state__in=INCLUDABLE_STATES)
)


def normal_from(run: Run) -> Run | None:
    """The latest run of the campaign accepted as the new normal that ended before this run
    started (or this run itself): the runs before it are of a level the site left behind."""
    before = run.started_at or run.created
    return (
        Run.objects.filter(campaign_id=run.campaign_id, baseline_choice=BaselineChoice.NEW_NORMAL)
        .filter(Q(finished_at__lt=before) | Q(pk=run.pk))
        .order_by("-finished_at")
        .first()
    )


def regressed_against(candidate: Run, mark: Run | None) -> bool:
    """Whether the candidate was judged regressed against the level now in force."""
    judgement = (candidate.summary or {}).get("judgement") or {}
    return judgement.get("status") == "regressed" and kept_out_by_watch(candidate, mark) is not None


def kept_out_by_watch(candidate: Run, mark: Run | None) -> str | None:
    """Why the watch keeps the candidate out of later baselines by itself, or None: it was judged
    regressed, or held by its band though far below its baseline's level (see the module's
    docstring). Only against the level now in force: a run judged against a level since left
    behind (one after an accepted new normal told "regressed" against the old one) is counted;
    an operator's include (or the new normal's own run) counts as chosen."""
    judgement = (candidate.summary or {}).get("judgement") or {}
    if candidate.baseline_choice != BaselineChoice.AUTO or judgement.get("normal_from") != (mark.pk if mark else None):
        return None
    if judgement.get("status") == "regressed":
        return "it was judged regressed (an operator may include it, or accept it as the new normal)"
    far = judgement.get("far")
    if far:
        return (
            f"its {far['label']} lay {abs(far['change']) * 100:.0f} % from its baseline's median, "
            f"{far['sigmas']:.1f} σ, though the band of {far['n']} runs held it (an operator may include it, "
            "or accept it as the new normal)"
        )
    return None


def comparable_runs(run: Run, limit: int = BASELINE_RUNS) -> list[Run]:
    """The campaign's latest runs before this one that a baseline may be made of."""
    before = run.started_at or run.created
    mark = normal_from(run)
    candidates = (
        Run.objects.filter(campaign_id=run.campaign_id, finished_at__lt=before)
        .filter(IN_BASELINE)
        .exclude(pk=run.pk)
        .order_by("-finished_at")
    )
    if mark is not None:
        candidates = candidates.filter(finished_at__gte=mark.finished_at)
    wanted = parameters(run)
    chosen = []
    for candidate in candidates[: limit * 5]:  # parameters differ rarely; a bounded look back
        if parameters(candidate) == wanted and kept_out_by_watch(candidate, mark) is None:
            chosen.append(candidate)
            if len(chosen) == limit:
                break
    return chosen


def band_sigmas(n: int) -> float:
    """The band's half-width in robust standard deviations, for a history of n runs."""
    return T_99.get(n - 1, 3.169 if n > 10 else T_99[2]) * math.sqrt(1 + 1 / n)


def band_method(threshold: float = DEFAULT_THRESHOLD) -> str:
    return (
        "median ± t99(n-1)·√(1+1/n)·σ, σ = max(1.4826·MAD, 1.2533·mean absolute deviation); "
        f"at least ±5 % of the median (±1 point for rates), at most ±{threshold * 100:.0f} % (the campaign's "
        "regression threshold); never below 0"
    )


def band(values: list[float], is_rate: bool = False, threshold: float = DEFAULT_THRESHOLD) -> dict:
    median = statistics.median(values)
    deviations = [abs(v - median) for v in values]
    # The MAD collapses when half the runs tie (41, 41, 41 of five nights gave 0 and a band at
    # its floor); the mean absolute deviation does not, and one outlier moves it only by 1/n.
    sigma = max(MAD_TO_SIGMA * statistics.median(deviations), MEAN_AD_TO_SIGMA * statistics.fmean(deviations))
    floor = ABS_RATE_FLOOR if is_rate else REL_FLOOR * abs(median)
    spread = band_sigmas(len(values)) * sigma
    half = max(spread, floor)
    # A rate's median is often 0: a share of it caps nothing, so rates keep their spread.
    capped = not is_rate and half > threshold * abs(median)
    if capped:
        half = threshold * abs(median)
    # Every figure judged is a rate, a time or a fraction: a lower edge under zero is a band no
    # run can fall out of downwards, so it says 0.
    return {"median": median, "sigma": sigma, "low": max(median - half, 0.0), "high": median + half,
            "capped": capped, "threshold": threshold, "spread_half": max(spread, floor),
            "method": band_method(threshold)}  # fmt: skip


def judge(run: Run, baseline: list[Run] | None = None, summary: dict | None = None) -> dict:
    """The run against its baseline: every figure with its band, and the suspects if it regressed.
    `summary` is the run's own results when they are not stored yet (finalize)."""
    if run.retry_of_id is not None:
        return {
            "baseline_runs": [], "figures": [], "suspects": [], "status": "no_baseline",
            "headline": f"A retry of run #{run.retry_of_id}: it re-drives only what that run did not finish, "
            "so no full run is comparable and it is not judged.",
        }  # fmt: skip
    baseline = comparable_runs(run) if baseline is None else baseline
    own = figures_of((run.summary or {}) if summary is None else summary)
    mark = normal_from(run)
    judged = {"baseline_runs": [r.pk for r in baseline], "figures": [], "suspects": [],
              "normal_from": mark.pk if mark else None}  # fmt: skip
    if len(baseline) < MIN_BASELINE_RUNS:
        n = len(baseline)
        return {
            **judged,
            "status": "no_baseline",
            "headline": f"No baseline yet: {n} comparable run(s), {MIN_BASELINE_RUNS} needed.",
        }
    history = [figures_of(r.summary or {}) for r in baseline]
    threshold = threshold_of(run)
    for key, (figure, value) in own.items():
        values = [h[key][1] for h in history if key in h]
        if len(values) < MIN_BASELINE_RUNS:
            continue
        b = band(values, figure.is_rate, threshold)
        judged["figures"].append(_judged(figure, value, b, len(values)))
    changed = [f for f in judged["figures"] if f["status"] != "within"]
    regressed = [f for f in changed if f["status"] == "regressed"]
    judged["status"] = "regressed" if regressed else ("improved" if changed else "within")
    if not regressed:
        judged["far"] = next(
            ({k: f[k] for k in ("key", "label", "change", "sigmas", "n")} for f in judged["figures"] if f["far"]), None
        )
    judged["backends"] = _by_backend(judged["figures"])
    episode = _open_regression(run, mark)
    if regressed and episode is not None:
        # The same slowdown as the run before: its start, its suspects, how long it has lasted.
        judged["ongoing"] = {"since": episode["since"], "runs": episode["runs"] + 1}
        judged["suspects"] = episode["suspects"]
    elif regressed:
        since = max(r.finished_at for r in baseline)
        judged["suspects"] = suspects(run, since)
    elif episode is not None:
        judged["recovered"] = {"since": episode["since"], "runs": episode["runs"]}
        judged["status"] = "recovered"
    judged["headline"] = _headline(judged, regressed or changed)
    return judged


def threshold_of(run: Run) -> float:
    """The campaign's regression threshold as a share of the median (a setting of the watch, read
    when the run is judged, not frozen with the run's parameters)."""
    percent = Campaign.objects.filter(pk=run.campaign_id).values_list("regression_threshold", flat=True).first()
    return (percent or DEFAULT_THRESHOLD * 100) / 100


def _open_regression(run: Run, mark: Run | None) -> dict | None:
    """The regression the campaign's previous judged run of the same parameters was in, against
    the level in force now: {"since": its first run, "runs": how many runs it has lasted,
    "suspects": those named at its start}; None when that run was not regressed."""
    before = run.started_at or run.created
    previous = (
        Run.objects.filter(campaign_id=run.campaign_id, finished_at__lt=before, retry_of__isnull=True,
                           state__in=INCLUDABLE_STATES, summary__judgement__status__isnull=False)
        .exclude(pk=run.pk)
        .order_by("-finished_at")
    )  # fmt: skip
    wanted = parameters(run)
    for candidate in previous[:BASELINE_RUNS]:
        if parameters(candidate) != wanted:
            continue
        judgement = candidate.summary["judgement"]
        if judgement.get("status") != "regressed" or judgement.get("normal_from") != (mark.pk if mark else None):
            return None
        ongoing = judgement.get("ongoing") or {"since": candidate.pk, "runs": 1}
        return {**ongoing, "suspects": judgement.get("suspects") or []}
    return None


def _by_backend(figures: list[dict]) -> dict[str, str]:
    """Each backend's own verdict, from its own figures: the status grid colours a backend's cell
    by it, so a run that slowed EOS does not paint the dCache it also wrote to."""
    statuses: dict[str, set[str]] = {}
    for f in figures:
        if f["backend"]:
            statuses.setdefault(f["backend"], set()).add(f["status"])
    return {
        name: "regressed" if "regressed" in found else ("improved" if "improved" in found else "within")
        for name, found in sorted(statuses.items())
    }


def _judged(figure: Figure, value: float, b: dict, n: int) -> dict:
    outside = value < b["low"] or value > b["high"]
    up = value > b["median"]
    worse = up != figure.higher_is_better and value != b["median"]
    status = "within" if not outside else ("regressed" if worse else "improved")
    change = (value - b["median"]) / b["median"] if b["median"] else None
    sigmas = abs(value - b["median"]) / b["sigma"] if b["sigma"] else None
    far = (
        status == "within" and worse and not figure.is_rate and change is not None
        and abs(change) >= FAR_MIN_CHANGE and (sigmas is None or sigmas >= FAR_SIGMAS)
    )  # fmt: skip
    return {"key": figure.key, "label": figure.label, "value": value, **b, "n": n, "status": status,
            "change": change, "sigmas": sigmas, "higher_is_better": figure.higher_is_better,
            "unit": figure.unit, "backend": figure.backend, "far": far,
            "why": _why(status, b, change, sigmas, far)}  # fmt: skip


def _why(status: str, b: dict, change: float | None, sigmas: float | None, far: bool) -> str:
    """The judgement of one figure in words that agree with its band and its sigma."""
    by = f"{sigmas:.1f} σ" if sigmas is not None else "no spread"
    limit = f"{b['threshold'] * 100:.0f} %"
    beyond = change is not None and abs(change) > b["threshold"]
    held_by_spread = change is not None and abs(change * b["median"]) <= b.get("spread_half", 0)
    if status != "within" and held_by_spread:
        return f"beyond the {limit} threshold (only {by}: the spread of these runs alone would hold it)"
    if status != "within":
        return f"outside the band ({by}" + (f", and beyond the {limit} threshold)" if beyond else ")")
    if far:
        return f"inside the band, yet {by} from the median: kept out of later baselines"
    return f"inside the band ({by})"


def suspects(run: Run, since: datetime) -> list[dict]:
    """Disturbing events of the run's scope between the newest baseline run and the run's end,
    newest first: what changed since the door was last seen within its band."""
    window = run_window(run)
    until = window[1] if window else (run.finished_at or run.created)
    events = (
        Event.objects.filter(touching(run), kind__in=DISTURBING_KINDS, time__gt=since, time__lte=until)
        .select_related("host")
        .order_by("-time", "-pk")[:SUSPECTS]
    )
    return [
        {"event": e.pk, "time": e.time.isoformat(), "kind": e.kind, "summary": e.summary,
         "where": where.name if (where := e.host or e.endpoint or e.backend) else "site"}
        for e in attach(events)
    ]  # fmt: skip


def _headline(judged: dict, notable: list[dict]) -> str:
    n = len(judged["baseline_runs"])
    if judged.get("recovered"):
        r = judged["recovered"]
        lasted = f"{r['runs']} run{'s' if r['runs'] != 1 else ''}"
        prefix = f"Recovered: the regression since run #{r['since']} lasted {lasted}. "
    else:
        prefix = ""
    if not notable:
        text = prefix + f"Within the band of its {n} comparable runs on every figure"
        far = judged.get("far")
        if far:
            # "Within" alone would hide that the watch keeps this run out of later baselines.
            side = "below" if far["change"] < 0 else "above"
            by = f"{far['sigmas']:.1f} σ" if far["sigmas"] is not None else "no spread"
            text += (
                f", though its {far['label']} lay {abs(far['change']) * 100:.0f} % {side} their median "
                f"({by}): kept out of later baselines"
            )
        return text + "."
    # The figure a site watches first leads (throughput before copy times and rates), then the largest change.
    worst = min(notable, key=lambda f: (_RANK.get(f["key"], len(_RANK)), -abs(f["change"] or 0)))
    change = f"{abs(worst['change']) * 100:.0f} %" if worst["change"] is not None else "off its band"
    word = "regressed" if worst["status"] == "regressed" else "improved"
    text = prefix + f"{worst['label'].capitalize()} {word} {change} against the median of {n} comparable runs"
    if judged.get("ongoing"):
        o = judged["ongoing"]
        text += f" (ongoing since run #{o['since']}, {o['runs']} runs)"
    if judged["suspects"]:
        first = judged["suspects"][0]
        when = f"{first['time'][:10]} {first['time'][11:16]} UTC"
        text += f"; since then: {first['kind'].replace('_', ' ')} on {first['where']} at {when}"
    return text + "."

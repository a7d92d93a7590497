"""An operator's word on a run's place in its campaign's baselines, and judging a run again.

The rule (baselines.IN_BASELINE) takes succeeded, undisturbed runs. A site knows nights the
rule cannot: a partial run cut short by its byte budget whose copies were sound, a disturbed
run whose logged change did not touch the data path; or a night that succeeded but was not
the door's (a WAN incident, a hypervisor migration). The operator's choice is kept on the run
with who and why, and logged as a note on it, so the change log says who shaped a baseline.

A run's judgement is stored as it stood when the run ended. Judging it again (after a choice
changed its baseline) is an operator's act, and the new judgement carries every earlier status
and headline with who judged it again and when, so nobody mistakes it for what the run was
first told.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.utils import timezone

from campaigns.choices import ACTIVE_RUN_STATES, BaselineChoice, RunState
from campaigns.models import Run
from campaigns.results import baselines, finalize
from collectors.events import log_event

REASON_MAX = 300


def standing(run: Run) -> dict:
    """Whether later runs of the campaign may count this run in their baseline, and why: the
    same rule as baselines.IN_BASELINE, told in words for the run page."""
    chosen_by = run.baseline_chosen_by.get_username() if run.baseline_chosen_by else "an operator"
    said = f"{chosen_by}: {run.baseline_reason}" if run.baseline_reason else chosen_by
    if run.state in ACTIVE_RUN_STATES:
        counted, why = False, "it has not ended"
    elif run.retry_of_id is not None:
        counted, why = False, f"a retry of run #{run.retry_of_id} re-drives only what that run did not finish"
    elif run.baseline_choice == BaselineChoice.EXCLUDE:
        counted, why = False, f"left out by {said}"
    elif run.baseline_choice == BaselineChoice.NEW_NORMAL and run.state in baselines.INCLUDABLE_STATES:
        counted, why = True, f"accepted as the new normal by {said}: later baselines start here"
    elif run.baseline_choice == BaselineChoice.INCLUDE and run.state in baselines.INCLUDABLE_STATES:
        counted, why = True, f"included by {said}"
    elif run.state != RunState.SUCCEEDED:
        counted, why = False, f"it ended {run.state}"
    elif run.disturbed:
        counted, why = False, "a restart or config change of its scope fell in its window"
    elif kept_out := baselines.kept_out_by_watch(run, baselines.normal_from(run)):
        counted, why = False, kept_out
    else:
        counted, why = True, "it succeeded undisturbed"
    return {"counted": counted, "why": why, "choice": run.baseline_choice}


def choose(run: Run, choice: str, reason: str, user=None) -> Run:
    """Set the run's baseline choice. Including or leaving out needs a reason (the next
    operator must know why a night counts or not); back to the rule needs none."""
    reason = (reason or "").strip()
    if choice not in BaselineChoice.values:
        raise ValidationError({"choice": f"Give one of: {', '.join(BaselineChoice.values)}."})
    if len(reason) > REASON_MAX:
        raise ValidationError({"reason": f"At most {REASON_MAX} characters."})
    if choice != BaselineChoice.AUTO and not reason:
        raise ValidationError({"reason": "Say why this run is included or left out."})
    if choice == BaselineChoice.NEW_NORMAL:
        return accept_new_normal(run, reason, user)
    if run.state in ACTIVE_RUN_STATES:
        raise ValidationError({"state": f"Run #{run.pk} is {run.state}: choose once it has ended."})
    if choice == BaselineChoice.INCLUDE and run.retry_of_id is not None:
        raise ValidationError(
            {"choice": f"Run #{run.pk} retries run #{run.retry_of_id}: a few re-driven files say nothing of a night."}
        )
    if choice == BaselineChoice.INCLUDE and run.state not in baselines.INCLUDABLE_STATES:
        raise ValidationError(
            {"choice": f"Run #{run.pk} ended {run.state}: only a succeeded or partial run can be in a baseline."}
        )
    run.baseline_choice = choice
    run.baseline_reason = reason if choice != BaselineChoice.AUTO else ""
    run.baseline_chosen_by = user if user is not None and user.is_authenticated else None
    run.baseline_chosen_at = timezone.now()
    run.save(update_fields=["baseline_choice", "baseline_reason", "baseline_chosen_by", "baseline_chosen_at"])
    words = {BaselineChoice.AUTO: "back to the rule for", BaselineChoice.INCLUDE: "included in",
             BaselineChoice.EXCLUDE: "left out of"}  # fmt: skip
    summary = f"Run #{run.pk} {words[choice]} the baselines of {run.campaign.name}"
    log_event(
        "note", summary + (f": {reason}" if reason else ""), run=run, user=run.baseline_chosen_by,
        source="operator" if run.baseline_chosen_by else "storageops",
    )  # fmt: skip
    return run


def accept_new_normal(run: Run, reason: str, user=None) -> Run:
    """Accept the run's level as the campaign's new normal after a real, intended change (new
    disks, a new door, a throttle the site chose): later runs are judged against this run and
    those after it only, so the slowdown it began is no longer a regression, and a return to the
    old level is a change. Logged as a note with who and why; undone by setting the run back to
    the rule (choose(run, "auto"))."""
    reason = (reason or "").strip()
    if not reason:
        raise ValidationError({"reason": "Say what changed for good: the next operator must know why the level moved."})
    if len(reason) > REASON_MAX:
        raise ValidationError({"reason": f"At most {REASON_MAX} characters."})
    if run.state in ACTIVE_RUN_STATES:
        raise ValidationError({"state": f"Run #{run.pk} is {run.state}: accept it once it has ended."})
    if not can_start_a_baseline(run):
        raise ValidationError(
            {"state": f"Run #{run.pk} ({run.state}{', a retry' if run.retry_of_id else ''}) cannot start a baseline: "
             "accept a succeeded or partial full run."}
        )  # fmt: skip
    run.baseline_choice = BaselineChoice.NEW_NORMAL
    run.baseline_reason = reason
    run.baseline_chosen_by = user if user is not None and user.is_authenticated else None
    run.baseline_chosen_at = timezone.now()
    run.save(update_fields=["baseline_choice", "baseline_reason", "baseline_chosen_by", "baseline_chosen_at"])
    log_event(
        "note", f"Run #{run.pk} accepted as the new normal of {run.campaign.name}: {reason}", run=run,
        user=run.baseline_chosen_by, source="operator" if run.baseline_chosen_by else "storageops",
    )  # fmt: skip
    return run


def can_start_a_baseline(run: Run) -> bool:
    """What accept_new_normal takes: a full run (not a retry) that ended succeeded or partial."""
    return run.retry_of_id is None and run.state in baselines.INCLUDABLE_STATES


def accepted_among(runs: list[Run]) -> Run | None:
    """The latest of these runs accepted as the new normal (the campaign page's recent runs, so
    the page asks the database nothing more)."""
    accepted = [r for r in runs if r.baseline_choice == BaselineChoice.NEW_NORMAL and r.finished_at]
    return max(accepted, key=lambda r: r.finished_at, default=None)


def judge_again(run: Run, user=None) -> dict:
    """Judge the run against its baseline as the choices make it now, and store that judgement
    with the earlier ones it replaces."""
    if run.state in ACTIVE_RUN_STATES or not (run.summary or {}).get("total"):
        raise ValidationError({"state": f"Run #{run.pk} is {run.state}: it has no results to judge yet."})
    old = (run.summary or {}).get("judgement") or {}
    judgement = baselines.judge(run)
    who = user.get_username() if user is not None and user.is_authenticated else ""
    earlier = [*old.get("earlier", []), {"status": old.get("status", ""), "headline": old.get("headline", "")}]
    judgement["earlier"] = earlier if old else []
    judgement["judged_again"] = {"by": who, "at": timezone.now().isoformat()}
    finalize.set_judgement(run, judgement)
    was = f" (was: {old.get('status')})" if old else ""
    log_event(
        "note", f"Run #{run.pk} judged again: {judgement['status']}{was}", source="operator" if who else "storageops",
        run=run, user=user if who else None, detail=judgement["headline"],
    )  # fmt: skip
    return judgement

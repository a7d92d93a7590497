"""An operator's word on which runs make a campaign's baselines, retries never among them, and
judging a run again with its earlier judgement kept (the rules; the regression watch's own
rules are in test_baselines.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from campaigns.models import Run
from campaigns.results import baseline_choice, baselines, history
from collectors.models import Event
from tests.campaigns.results.test_baselines import MB, finished
from tests.support.api import api
from tests.support.factories import mock_campaign

pytestmark = pytest.mark.django_db


@pytest.fixture
def nights():
    """Four quiet nights an hour apart, then the campaign and the time after them."""
    campaign = mock_campaign("nightly", file_count=100, concurrency_steps=[4])
    now = timezone.now()
    past = [finished(campaign, now - timedelta(hours=6 - i), (100 + d) * MB) for i, d in enumerate([0, 2, -1, 1])]
    return campaign, now, past


def _counted_by_query(run: Run) -> bool:
    return Run.objects.filter(baselines.IN_BASELINE, pk=run.pk).exists()


def test_a_retry_is_never_in_a_baseline_and_is_not_judged(nights):
    campaign, now, past = nights
    # A retry of the last night re-drove its three failed files: fast or slow, it is not a night.
    retry = finished(campaign, now - timedelta(hours=1), 3 * MB, retry_of=past[-1])
    judged = baselines.judge(retry)
    assert judged["status"] == "no_baseline" and judged["figures"] == []
    assert judged["headline"].startswith(f"A retry of run #{past[-1].pk}")
    later = finished(campaign, now, 100 * MB)
    assert baselines.judge(later)["baseline_runs"] == [r.pk for r in reversed(past)]
    assert baseline_choice.standing(retry) == {
        "counted": False,
        "why": f"a retry of run #{past[-1].pk} re-drives only what that run did not finish",
        "choice": "auto",
    }
    with pytest.raises(ValidationError, match="a few re-driven files say nothing"):
        baseline_choice.choose(retry, "include", "it was fine", user=None)


def test_an_operator_includes_a_partial_night_and_leaves_out_another(nights, operator):
    campaign, now, past = nights
    # Cut by its byte budget after 90 of 100 copies, all of them sound.
    partial = finished(campaign, now - timedelta(minutes=30), 101 * MB, state="partial")
    assert not baseline_choice.standing(partial)["counted"]
    assert baseline_choice.standing(partial)["why"] == "it ended partial"
    later = finished(campaign, now, 100 * MB)
    assert partial.pk not in baselines.judge(later)["baseline_runs"]

    baseline_choice.choose(partial, "include", "budget cut, copies sound", user=operator)
    baseline_choice.choose(past[1], "exclude", "WAN incident that night", user=operator)
    judged = baselines.judge(later)
    assert judged["baseline_runs"] == [partial.pk, past[3].pk, past[2].pk, past[0].pk]
    assert baseline_choice.standing(partial)["why"] == "included by otto-operator: budget cut, copies sound"
    assert baseline_choice.standing(past[1])["why"] == "left out by otto-operator: WAN incident that night"
    # Who shaped the baseline is in the change log, on the run.
    notes = Event.objects.filter(kind="note", run_id__in=[partial.pk, past[1].pk]).order_by("time")
    assert [(e.who, e.summary) for e in notes] == [
        ("otto-operator", f"Run #{partial.pk} included in the baselines of nightly: budget cut, copies sound"),
        ("otto-operator", f"Run #{past[1].pk} left out of the baselines of nightly: WAN incident that night"),
    ]
    # Back to the rule: no reason needed, and the earlier reason goes with the choice.
    baseline_choice.choose(past[1], "auto", "", user=operator)
    past[1].refresh_from_db()
    assert (past[1].baseline_choice, past[1].baseline_reason) == ("auto", "")
    assert past[1].pk in baselines.judge(later)["baseline_runs"]


def test_the_words_and_the_query_agree_on_every_kind_of_run(nights, operator):
    campaign, now, past = nights
    runs = [
        *past,
        finished(campaign, now, 100 * MB, state="partial"),
        finished(campaign, now, 100 * MB, disturbed=True),
        finished(campaign, now, 100 * MB, state="failed"),
        finished(campaign, now, 100 * MB, state="cancelled"),
        finished(campaign, now, 100 * MB, retry_of=past[0]),
        Run.objects.create(campaign=campaign, state="running"),
    ]
    baseline_choice.choose(runs[4], "include", "sound", user=operator)
    baseline_choice.choose(runs[5], "include", "the restart was of another door", user=operator)
    baseline_choice.choose(past[0], "exclude", "odd", user=operator)
    seen = {(baseline_choice.standing(r)["counted"], _counted_by_query(r)) for r in runs}
    assert seen == {(True, True), (False, False)}
    assert [baseline_choice.standing(r)["counted"] for r in runs] == [
        False, True, True, True, True, True, False, False, False, False,
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("state", "choice", "reason", "field", "message"),
    [
        ("succeeded", "sometimes", "x", "choice", "Give one of: auto, include, exclude, accepted."),
        ("succeeded", "exclude", "  ", "reason", "Say why this run is included or left out."),
        ("succeeded", "exclude", "x" * 301, "reason", "At most 300 characters."),
        ("running", "exclude", "x", "state", "is running: choose once it has ended."),
        ("failed", "include", "x", "choice", "ended failed: only a succeeded or partial run can be in a baseline."),
        ("cancelled", "include", "x", "choice", "ended cancelled: only a succeeded or partial run"),
    ],
)
def test_a_refused_choice_names_its_field_and_changes_nothing(operator, state, choice, reason, field, message):
    run = Run.objects.create(campaign=mock_campaign("refusals"), state=state)
    with pytest.raises(ValidationError) as refused:
        baseline_choice.choose(run, choice, reason, user=operator)
    assert message in " ".join(refused.value.message_dict[field])
    run.refresh_from_db()
    assert (run.baseline_choice, run.baseline_reason, run.baseline_chosen_by) == ("auto", "", None)
    assert not Event.objects.filter(run_id=run.pk).exists()


def test_judging_again_keeps_what_the_run_was_first_told(nights, operator):
    campaign, now, _ = nights
    # A night at 140 MB/s (a cache warmed by another test) widened the band until a run 20 %
    # slower fell within it; the site knows why that night was fast.
    fast = finished(campaign, now - timedelta(minutes=30), 140 * MB)
    run = finished(campaign, now, 80 * MB)
    run.summary["judgement"] = first = baselines.judge(run)
    run.save()
    assert fast.pk in first["baseline_runs"] and first["status"] == "within"
    with pytest.raises(ValidationError, match="it has no results to judge yet"):
        baseline_choice.judge_again(Run.objects.create(campaign=campaign, state="running"), user=operator)

    baseline_choice.choose(fast, "exclude", "cache warmed by another test", user=operator)
    again = baseline_choice.judge_again(run, user=operator)
    assert fast.pk not in again["baseline_runs"] and again["status"] == "regressed"
    assert again["headline"].startswith("Throughput regressed 20 % against the median of 4 comparable runs")
    assert again["earlier"] == [{"status": "within", "headline": first["headline"]}]
    assert again["judged_again"]["by"] == "otto-operator"
    run.refresh_from_db()
    # Only the judgement changed: every other section of the results is as it was.
    assert run.summary["judgement"] == again and run.summary["total"]["throughput_bps"] == 80 * MB
    assert Event.objects.filter(run_id=run.pk, kind="note", summary__startswith=f"Run #{run.pk} judged again").exists()
    # A second time keeps both earlier judgements, oldest first.
    assert [e["status"] for e in baseline_choice.judge_again(run, user=operator)["earlier"]] == ["within", "regressed"]


def test_the_history_marks_each_run_counted_or_not_with_why(nights, operator):
    campaign, _, past = nights
    baseline_choice.choose(past[2], "exclude", "WAN incident", user=operator)
    points = {p["run"]: p for p in history.campaign_history(campaign)["points"]}
    assert points[past[2].pk]["counted"] is False
    assert points[past[2].pk]["baseline_why"] == "left out by otto-operator: WAN incident"
    assert points[past[0].pk]["counted"] is True


def test_the_api_includes_leaves_out_and_judges_again(nights, operator, viewer):
    campaign, now, past = nights
    run = finished(campaign, now, 100 * MB)
    run.summary["judgement"] = baselines.judge(run)
    run.save()
    client = api(operator, "operator")
    left_out = client.post(f"/api/v1/runs/{past[0].pk}/baseline/", {"choice": "exclude", "reason": "odd night"},
                           format="json")  # fmt: skip
    assert left_out.status_code == 200, left_out.content
    assert left_out.json()["in_baseline"] == {"counted": False, "why": "left out by otto-operator: odd night",
                                              "choice": "exclude"}  # fmt: skip
    refused = client.post(f"/api/v1/runs/{past[1].pk}/baseline/", {"choice": "include"}, format="json")
    assert refused.status_code == 400 and "reason" in refused.json()["error"]["fields"]
    unknown = client.post(f"/api/v1/runs/{past[1].pk}/baseline/", {"choice": "maybe"}, format="json")
    assert unknown.status_code == 400 and "choice" in unknown.json()["error"]["fields"]
    again = client.post(f"/api/v1/runs/{run.pk}/judge-again/", format="json")
    assert again.status_code == 200
    assert past[0].pk not in again.json()["judgement"]["baseline_runs"]
    assert again.json()["judgement"]["earlier"][0]["status"] == "within"
    assert api(viewer, "viewer").post(f"/api/v1/runs/{run.pk}/judge-again/").status_code == 403


def test_the_run_page_shows_the_standing_and_lets_an_operator_change_it(nights, client, operator, viewer):
    _, _, past = nights
    client.force_login(viewer)
    page = client.get(past[0].get_absolute_url()).content.decode()
    assert 'data-baseline-counted="1"' in page and "it succeeded undisturbed" in page
    assert "Judge this run again" not in page  # a viewer sees the standing, not the form
    assert client.post(f"/campaigns/runs/{past[0].pk}/baseline/", {"choice": "exclude"}).status_code == 403

    client.force_login(operator)
    refused = client.post(f"/campaigns/runs/{past[0].pk}/baseline/", {"choice": "exclude", "reason": ""}, follow=True)
    assert "Say why this run is included or left out." in refused.content.decode()
    saved = client.post(f"/campaigns/runs/{past[0].pk}/baseline/", {"choice": "exclude", "reason": "odd night"},
                        follow=True).content.decode()  # fmt: skip
    assert 'data-baseline-counted="0"' in saved and "left out by otto-operator: odd night" in saved
    judged = client.post(f"/campaigns/runs/{past[3].pk}/judge-again/", follow=True).content.decode()
    assert f"Run #{past[3].pk} judged again" in judged and 'id="judged-again"' in judged

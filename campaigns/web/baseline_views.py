"""A run's place in its campaign's baselines: an operator includes or leaves it out, judges it
again, or accepts it as the campaign's new normal from the campaign's page (thin:
campaigns.results.baseline_choice does the work)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from campaigns.models import Campaign, Run
from campaigns.results import baseline_choice
from campaigns.web.forms import BaselineChoiceForm, NewNormalForm


def _refused(request: HttpRequest, run: Run, exc: ValidationError) -> HttpResponse:
    for message in exc.messages:
        messages.error(request, f"Run #{run.pk}: {message}")
    return redirect(f"{run.get_absolute_url()}#baseline")


@require_POST
@permission_required("campaigns.choose_baseline", raise_exception=True)
def run_baseline(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(Run.objects.select_related("campaign"), pk=pk)
    form = BaselineChoiceForm(request.POST)
    if not form.is_valid():
        return _refused(request, run, ValidationError([f"{k}: {' '.join(v)}" for k, v in form.errors.items()]))
    try:
        baseline_choice.choose(run, form.cleaned_data["choice"], form.cleaned_data["reason"], user=request.user)
    except ValidationError as exc:
        return _refused(request, run, exc)
    messages.success(request, f"Run #{run.pk}: {baseline_choice.standing(run)['why']}. Later runs are judged so.")
    return redirect(f"{run.get_absolute_url()}#baseline")


@require_POST
@permission_required("campaigns.choose_baseline", raise_exception=True)
def run_judge_again(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(Run.objects.select_related("campaign"), pk=pk)
    try:
        judgement = baseline_choice.judge_again(run, user=request.user)
    except ValidationError as exc:
        return _refused(request, run, exc)
    messages.success(request, f"Run #{run.pk} judged again: {judgement['headline']}")
    return redirect(f"{run.get_absolute_url()}#judgement")


@require_POST
@permission_required("campaigns.choose_baseline", raise_exception=True)
def campaign_new_normal(request: HttpRequest, pk: int) -> HttpResponse:
    campaign = get_object_or_404(Campaign, pk=pk)
    back = redirect(f"{campaign.get_absolute_url()}#new-normal")
    form = NewNormalForm(request.POST, campaign=campaign)
    if not form.is_valid():
        for name, errors in form.errors.items():
            messages.error(request, f"Accept as the new normal: {form.fields[name].label}: {' '.join(errors)}")
        return back
    run = form.cleaned_data["run"]
    try:
        baseline_choice.accept_new_normal(run, form.cleaned_data["reason"], user=request.user)
    except ValidationError as exc:
        for message in exc.messages:
            messages.error(request, f"Run #{run.pk}: {message}")
        return back
    messages.success(
        request,
        f"Run #{run.pk} accepted as the new normal of {campaign.name}: later runs are judged against it and "
        "the runs after it. A run already judged keeps its judgement until it is judged again on its page.",
    )
    return back

"""A run's place in its campaign's baselines: an operator includes or leaves it out, or judges
it again (thin: campaigns.results.baseline_choice does the work)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from campaigns.models import Run
from campaigns.results import baseline_choice
from campaigns.web.forms import BaselineChoiceForm


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

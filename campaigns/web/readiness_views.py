"""The readiness check pages: start one from an endpoint's page, follow its grid of steps."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from campaigns import readiness
from campaigns.models import Endpoint, ReadinessCheck
from campaigns.web.forms import ReadinessForm


@require_POST
@permission_required("campaigns.add_readinesscheck", raise_exception=True)
def readiness_start(request: HttpRequest, pk: int) -> HttpResponse:
    endpoint = get_object_or_404(Endpoint, pk=pk)
    form = ReadinessForm(request.POST, endpoint=endpoint)
    try:
        if not form.is_valid():
            raise ValidationError([m for errors in form.errors.values() for m in errors])
        check = readiness.start(endpoint, form.cleaned_data.get("peer"), user=request.user)
    except ValidationError as exc:
        for message in exc.messages:
            messages.error(request, f"Cannot check {endpoint.name}: {message}")
        return redirect(endpoint)
    messages.success(request, f"Readiness check #{check.pk} queued.")
    return redirect(check)


def readiness_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """The whole page, or (asked by htmx while the check runs) its grid alone."""
    check = get_object_or_404(ReadinessCheck.objects.select_related("endpoint", "peer", "requested_by"), pk=pk)
    partial = request.headers.get("HX-Request") == "true"
    template = "campaigns/partials/readiness_grid.html" if partial else "campaigns/readiness_detail.html"
    response = render(request, template, {"check": check, "steps": check.steps})
    response["Vary"] = "HX-Request"
    return response

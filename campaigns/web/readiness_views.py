"""The readiness check pages: start one from an endpoint's page, follow its grid of steps,
cancel it; the readiness grid of every endpoint and pair, and its daily schedule."""

from __future__ import annotations

import time

from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from campaigns import readiness
from campaigns.models import Endpoint, ReadinessCheck, ReadinessGrid
from campaigns.readiness import grid as readiness_grid
from campaigns.readiness import lease as readiness_lease
from campaigns.readiness import probes as readiness_probes
from campaigns.web.forms import ReadinessForm, ReadinessScheduleForm


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


def _steps_with_elapsed(check: ReadinessCheck) -> list[dict]:
    now = time.time()
    return [
        {**s, "elapsed": now - s["started"]} if s["state"] == "running" and s.get("started") else s for s in check.steps
    ]


def readiness_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """The whole page, or (asked by htmx while the check runs) its grid alone."""
    check = get_object_or_404(ReadinessCheck.objects.select_related("endpoint", "peer", "requested_by"), pk=pk)
    partial = request.headers.get("HX-Request") == "true"
    template = "campaigns/partials/readiness_grid.html" if partial else "campaigns/readiness_detail.html"
    # A check the recovery ended is followed until the removal after it says what became of its files.
    following = not check.finished or readiness_probes.removal_pending(check.steps)
    context = {"check": check, "steps": _steps_with_elapsed(check), "following": following}
    response = render(request, template, context)
    response["Vary"] = "HX-Request"
    return response


@require_POST
@permission_required("campaigns.add_readinesscheck", raise_exception=True)
def readiness_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    """Stop the check (htmx: the step grid comes back; a plain form post goes back to the page)."""
    check = get_object_or_404(ReadinessCheck, pk=pk)
    if not readiness_lease.request_cancel(check):
        messages.error(request, f"A check that is {check.state} cannot be cancelled.")
    if request.headers.get("HX-Request") == "true":
        return readiness_detail(request, pk)
    return redirect(check)


def readiness_grid_page(request: HttpRequest, pk: int | None = None) -> HttpResponse:
    """The latest grid (or grid `pk`): a cell per endpoint or ordered pair and kind of step."""
    grids = ReadinessGrid.objects.all()
    grid = get_object_or_404(grids, pk=pk) if pk else grids.first()
    rows = readiness_grid.rows(grid) if grid else []
    live = grid is not None and grid.ended_at is None
    context = {
        "grid": grid,
        "rows": rows,
        "columns": readiness_grid.COLUMNS,
        "live": live,
        "endpoints": readiness_grid.grid_endpoints(),
        "schedule_form": ReadinessScheduleForm(initial={"daily_at": readiness_grid.daily_schedule()}),
        "daily_at": readiness_grid.daily_schedule(),
        "recent": grids[:10],
    }
    partial = request.headers.get("HX-Request") == "true"
    template = "campaigns/partials/readiness_matrix.html" if partial else "campaigns/readiness_grid_page.html"
    response = render(request, template, context)
    response["Vary"] = "HX-Request"
    return response


@require_POST
@permission_required("campaigns.add_readinesscheck", raise_exception=True)
def readiness_grid_start(request: HttpRequest) -> HttpResponse:
    if not readiness_grid.grid_endpoints():
        messages.error(request, "No endpoint to check: add endpoints with storage behind them first.")
        return redirect("campaigns:readiness_grid")
    grid = readiness_grid.start_grid(user=request.user)
    messages.success(request, f"Readiness grid #{grid.pk}: {grid.checks.count()} checks queued.")
    return redirect(grid)


@require_POST
@permission_required("campaigns.add_readinesscheck", raise_exception=True)
def readiness_grid_schedule(request: HttpRequest) -> HttpResponse:
    form = ReadinessScheduleForm(request.POST)
    if not form.is_valid():
        for field, errors in form.errors.items():
            for error in errors:
                messages.error(request, f"{form.fields[field].label if field in form.fields else field}: {error}")
        return redirect("campaigns:readiness_grid")
    at = form.cleaned_data["daily_at"] if form.cleaned_data["enabled"] else None
    readiness_grid.set_daily_schedule(at)
    messages.success(request, f"The grid runs every day at {at:%H:%M} UTC." if at else "The daily grid is off.")
    return redirect(reverse("campaigns:readiness_grid"))

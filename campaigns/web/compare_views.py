"""The comparison page and the JSON of its overlaid charts (campaigns.results.comparison does the work)."""

from __future__ import annotations

from urllib.parse import urlencode

from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from campaigns import sweeps
from campaigns.reports import content, download
from campaigns.results import comparison
from campaigns.web import chart_registry
from campaigns.web.forms import CompareForm
from storageops.api.errors import error_response


def _selection(form: CompareForm) -> tuple[list, comparison.Trim]:
    data = form.cleaned_data
    campaign = data.get("campaign")
    selected = comparison.select_runs(data["runs"], campaign.pk if campaign and not data["runs"] else None)
    margin = data.get("margin")
    trim = comparison.Trim(data.get("warmup") or 0, data.get("tail") or 0, margin)
    return selected, trim


def compared(form: CompareForm) -> dict:
    """What the page (and its report) shows of a valid form: the table, the runs, the trim, the charts."""
    selected, trim = _selection(form)
    result = comparison.compare(selected, trim)
    ids = ",".join(str(r.pk) for r in selected)
    # The charts are trimmed as the table: their data is asked with the same trim.
    query = {"runs": ids, "warmup": trim.warmup_seconds, "tail": trim.tail_seconds, "x": form.cleaned_data["x"]}
    x_label = sweeps.AXIS_LABELS[form.cleaned_data["x"]]
    if trim.event_margin_seconds is not None:
        query["margin"] = trim.event_margin_seconds
    charts = chart_registry.compare_page(urlencode(query), x_label, result["trimmed"])
    return {"result": result, "runs": selected, "trim": trim, "ids": ids, "x_label": x_label, "charts": charts,
            "x": form.cleaned_data["x"]}  # fmt: skip


def compare_page(request: HttpRequest) -> HttpResponse:
    form = CompareForm(request.GET or None)
    context: dict = {"form": form}
    if form.is_bound and form.is_valid():
        try:
            context.update(compared(form))
        except ValidationError as exc:
            form.add_error(None, exc.message_dict.get("runs", exc.messages))
    return render(request, "campaigns/compare.html", context, status=400 if form.errors else 200)


def compare_report(request: HttpRequest, as_pdf: bool = False) -> HttpResponse:
    """The comparison as asked (runs, trim, "steps against") as a report file."""
    form = CompareForm(request.GET)
    if not form.is_valid():
        return error_response(
            400, "Some fields are not valid.", {k: [str(m) for m in v] for k, v in form.errors.items()}
        )
    try:
        shown = compared(form)
    except ValidationError as exc:
        return error_response(400, "Some fields are not valid.", exc.message_dict)
    return download.response(content.comparison_report(shown, request.user), as_pdf)


def compare_data(request: HttpRequest) -> JsonResponse:
    """Each run's throughput over time (seconds since its start) and per step, for the overlays."""
    form = CompareForm(request.GET)
    if not form.is_valid():
        return error_response(
            400, "Some fields are not valid.", {k: [str(m) for m in v] for k, v in form.errors.items()}
        )
    try:
        selected, trim = _selection(form)
    except ValidationError as exc:
        return error_response(400, "Some fields are not valid.", exc.message_dict)
    return JsonResponse(comparison.overlay_series(selected, trim, x=form.cleaned_data["x"]))

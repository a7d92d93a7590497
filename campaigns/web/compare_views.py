"""The comparison page and the JSON of its overlaid charts (campaigns.results.comparison does the work)."""

from __future__ import annotations

from urllib.parse import urlencode

from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from campaigns import sweeps
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


def compare_page(request: HttpRequest) -> HttpResponse:
    form = CompareForm(request.GET or None)
    context: dict = {"form": form}
    if form.is_bound and form.is_valid():
        try:
            selected, trim = _selection(form)
        except ValidationError as exc:
            form.add_error(None, exc.message_dict.get("runs", exc.messages))
        else:
            context.update(result=comparison.compare(selected, trim), runs=selected, trim=trim)
            context["ids"] = ",".join(str(r.pk) for r in selected)
            # The charts are trimmed as the table: their data is asked with the same trim.
            query = {"runs": context["ids"], "warmup": trim.warmup_seconds, "tail": trim.tail_seconds,
                     "x": form.cleaned_data["x"]}  # fmt: skip
            context["x_label"] = sweeps.AXIS_LABELS[form.cleaned_data["x"]]
            if trim.event_margin_seconds is not None:
                query["margin"] = trim.event_margin_seconds
            trimmed = context["result"]["trimmed"]
            context["charts"] = chart_registry.compare_page(urlencode(query), context["x_label"], trimmed)
    return render(request, "campaigns/compare.html", context, status=400 if form.errors else 200)


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

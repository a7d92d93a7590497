"""Download a run's report (campaigns.reports builds it; these views only pick the run)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404

from campaigns.models import Run
from campaigns.reports import content, download


def run_report(request: HttpRequest, pk: int, as_pdf: bool = False) -> HttpResponse:
    run = get_object_or_404(Run.objects.select_related("campaign"), pk=pk)
    return download.response(content.run_report(run, request.user), as_pdf)

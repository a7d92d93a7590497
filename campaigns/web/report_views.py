"""Download a run's or a campaign history's report (campaigns.reports builds it; these views only
pick what it is of; the comparison's is compare_views.compare_report, which reads the page's form)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404

from campaigns.models import Campaign, Run
from campaigns.reports import content, download


def run_report(request: HttpRequest, pk: int, as_pdf: bool = False) -> HttpResponse:
    run = get_object_or_404(Run.objects.select_related("campaign"), pk=pk)
    return download.response(content.run_report(run, request.user), as_pdf)


def campaign_report(request: HttpRequest, pk: int, as_pdf: bool = False) -> HttpResponse:
    campaign = get_object_or_404(Campaign, pk=pk)
    return download.response(content.history_report(campaign, request.user), as_pdf)

"""Campaign, run and backend pages (thin: queries and templates only)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.generic import DetailView, ListView

from campaigns.models import Backend, Campaign, Endpoint, Run


class CampaignListView(ListView):
    model = Campaign
    paginate_by = 50


class CampaignDetailView(DetailView):
    model = Campaign

    def get_queryset(self):
        return Campaign.objects.prefetch_related("sources", "destinations")


class RunListView(ListView):
    model = Run
    paginate_by = 50

    def get_queryset(self):
        return Run.objects.select_related("campaign")


class RunDetailView(DetailView):
    model = Run

    def get_queryset(self):
        return Run.objects.select_related("campaign").prefetch_related("steps")


def run_progress(request: HttpRequest, pk: int) -> HttpResponse:
    """The live progress partial; it stops asking to be polled once the run has ended."""
    run = get_object_or_404(Run.objects.select_related("campaign"), pk=pk)
    response = render(request, "campaigns/partials/run_progress.html", {"run": run})
    response["Vary"] = "HX-Request"
    return response


class BackendListView(ListView):
    model = Backend

    def get_queryset(self):
        return Backend.objects.prefetch_related("endpoints")


class BackendDetailView(DetailView):
    model = Backend


class EndpointDetailView(DetailView):
    model = Endpoint

"""Campaign, run and backend pages (thin: queries and templates only)."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.generic import DetailView, ListView

from campaigns import scheduling
from campaigns.forms import CampaignScheduleForm
from campaigns.models import Backend, Campaign, CampaignSchedule, Endpoint, Run
from collectors.models import Event


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


def campaign_schedule(request: HttpRequest, pk: int) -> HttpResponse:
    """The schedule card of a campaign's page: shows, and for admins edits, the schedule."""
    campaign = get_object_or_404(Campaign, pk=pk)
    schedule = CampaignSchedule.objects.filter(campaign=campaign).first()
    can_edit = request.user.has_perm("campaigns.change_campaignschedule")
    form, saved = CampaignScheduleForm(instance=schedule), ""
    if request.method == "POST":
        if not can_edit:
            raise PermissionDenied
        if request.POST.get("action") == "delete":
            if schedule is not None:
                scheduling.delete_schedule(schedule)
            schedule, form, saved = None, CampaignScheduleForm(), "Schedule removed."
        else:
            form = CampaignScheduleForm(request.POST, instance=schedule or CampaignSchedule(campaign=campaign))
            if form.is_valid():
                schedule, saved = scheduling.save_schedule(form.save(commit=False)), "Schedule saved."
                form = CampaignScheduleForm(instance=schedule)
        if saved and not request.headers.get("HX-Request"):
            return redirect(campaign)
    decisions = Event.objects.filter(kind="schedule", detail__contains=f'"campaign": {campaign.pk},')[:5]
    context = {"campaign": campaign, "schedule": schedule, "form": form, "can_edit": can_edit, "saved": saved,
               "decisions": decisions}  # fmt: skip
    # htmx swaps only 2xx answers: the card with its errors comes back as 200 to htmx, 400 otherwise.
    refused = form.errors and not request.headers.get("HX-Request")
    response = render(request, "campaigns/partials/campaign_schedule.html", context, status=400 if refused else 200)
    response["Vary"] = "HX-Request"
    return response

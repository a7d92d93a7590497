"""Campaign and backend pages (thin: forms, queries and templates; services do the work).
Run pages are in run_views.py, the comparison in compare_views.py."""

from __future__ import annotations

import re

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import OuterRef, Prefetch, Q, Subquery
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST
from django.views.generic import DetailView, ListView

from campaigns import editing, readiness, runs
from campaigns.dashboard import home_context
from campaigns.models import Backend, Campaign, CampaignSchedule, Endpoint, ReadinessCheck, Run
from campaigns.results import baseline_choice
from campaigns.results.history import baseline_table, campaign_history
from campaigns.results.history import watch as history_watch
from campaigns.runs import scheduling
from campaigns.web import campaign_extras, chart_registry
from campaigns.web.forms import CampaignForm, CampaignScheduleForm, CloneForm, NewNormalForm, ReadinessForm
from collectors.models import Event


class CampaignListView(ListView):
    model = Campaign
    paginate_by = 50

    def get_queryset(self):
        # The latest run of each campaign in the same query: no query per row.
        latest = Run.objects.filter(campaign=OuterRef("pk")).order_by("-created")
        return Campaign.objects.annotate(
            last_run_id=Subquery(latest.values("pk")[:1]),
            last_run_state=Subquery(latest.values("state")[:1]),
            # A partial last run shows its counts beside its state.
            last_run_done=Subquery(latest.values("files_done")[:1]),
            last_run_failed=Subquery(latest.values("files_failed")[:1]),
            last_run_skipped=Subquery(latest.values("files_skipped")[:1]),
            last_run_cancelled=Subquery(latest.values("files_cancelled")[:1]),
        )


#: Runs listed on a campaign's page, newest first.
RECENT_RUNS = 50
BASELINE_TABLE_RUNS = 20  # the latest ended runs beside their bands; the history report has them all


class CampaignDetailView(DetailView):
    model = Campaign

    def get_queryset(self):
        # The latest runs only (a sliced prefetch): a campaign run nightly for years has thousands.
        recent = Run.objects.select_related("campaign").order_by("-created")[:RECENT_RUNS]
        return Campaign.objects.prefetch_related(
            "sources", "destinations", Prefetch("runs", queryset=recent, to_attr="recent_runs")
        )

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["charts"] = chart_registry.campaign_page(self.object.pk)
        recent = self.object.recent_runs
        context["watch"] = history_watch(self.object, recent, complete=len(recent) < RECENT_RUNS)
        context["site_target_rate_bps"] = settings.STORAGEOPS_TARGET_RATE_BPS
        context["baseline_table"] = baseline_table(self.object, limit=BASELINE_TABLE_RUNS)
        # "Accept as the new normal from run #N", offered among the runs listed (no more queries).
        context["accepted_normal"] = baseline_choice.accepted_among(recent)
        candidates = [r for r in recent if baseline_choice.can_start_a_baseline(r)]
        context["new_normal_form"] = NewNormalForm(campaign=self.object, runs=candidates) if candidates else None
        # Sites run a functional check before any stress test: offered for the endpoints without one.
        endpoints = [*self.object.sources.all(), *self.object.destinations.all()]
        context["unchecked_endpoints"] = readiness.unchecked(list(dict.fromkeys(endpoints)))
        # What the apps above campaigns add (alerts' subscription counts), by registry.
        context.update(campaign_extras.context(self.object))
        return context


def campaign_history_data(request: HttpRequest, pk: int) -> JsonResponse:
    """The history chart's points, bands and events for one figure (?figure=throughput)."""
    campaign = get_object_or_404(Campaign, pk=pk)
    figure = request.GET.get("figure", "throughput")
    if not re.fullmatch(r"[a-z0-9_]{1,40}", figure):
        return JsonResponse({"error": "figure: a figure's key, e.g. throughput or step_throughput_8"}, status=400)
    return JsonResponse(campaign_history(campaign, figure))


def _form_page(request: HttpRequest, form: CampaignForm, title: str) -> HttpResponse:
    return render(
        request, "campaigns/campaign_form.html", {"form": form, "title": title}, status=400 if form.errors else 200
    )


@permission_required("campaigns.add_campaign", raise_exception=True)
def campaign_create(request: HttpRequest) -> HttpResponse:
    form = CampaignForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        campaign = form.save()
        messages.success(request, f"Campaign {campaign.name} created.")
        return redirect(campaign)
    return _form_page(request, form, "New campaign")


@permission_required("campaigns.change_campaign", raise_exception=True)
def campaign_edit(request: HttpRequest, pk: int) -> HttpResponse:
    campaign = get_object_or_404(Campaign, pk=pk)
    form = CampaignForm(request.POST or None, request.FILES or None, instance=campaign)
    if request.method == "POST" and form.is_valid():
        form.save()
        messages.success(request, f"Campaign {campaign.name} saved; runs already made keep the values they froze.")
        return redirect(campaign)
    return _form_page(request, form, f"Edit {campaign.name}")


@permission_required("campaigns.add_campaign", raise_exception=True)
def campaign_clone(request: HttpRequest, pk: int) -> HttpResponse:
    original = get_object_or_404(Campaign, pk=pk)
    form = CloneForm(request.POST or None, initial={"name": f"{original.name} copy"})
    if request.method == "POST" and form.is_valid():
        try:
            copy = editing.clone_campaign(original, form.cleaned_data["name"])
        except ValidationError as exc:
            for message in exc.message_dict.get("name", exc.messages):
                form.add_error("name", message)
        else:
            messages.success(request, f"Cloned {original.name} as {copy.name}.")
            return redirect("campaigns:campaign_edit", copy.pk)
    status = 400 if form.errors else 200
    return render(request, "campaigns/campaign_clone.html", {"form": form, "original": original}, status=status)


@require_POST
@permission_required("campaigns.start_run", raise_exception=True)
def campaign_start(request: HttpRequest, pk: int) -> HttpResponse:
    campaign = get_object_or_404(Campaign, pk=pk)
    try:
        run = runs.start_run(campaign, user=request.user, trigger="web")
    except ValidationError as exc:
        for message in exc.messages:
            messages.error(request, f"Cannot start {campaign.name}: {message}")
        return redirect(campaign)
    messages.success(request, f"Run #{run.pk} of {campaign.name} queued.")
    return redirect(run)


class BackendListView(ListView):
    model = Backend

    def get_queryset(self):
        return Backend.objects.prefetch_related("endpoints")


class BackendDetailView(DetailView):
    model = Backend

    def get_queryset(self):
        return Backend.objects.prefetch_related("endpoints")


class EndpointDetailView(DetailView):
    model = Endpoint

    def get_queryset(self):
        return Endpoint.objects.select_related("backend").prefetch_related("hosts")

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        checks = ReadinessCheck.objects.filter(Q(endpoint=self.object) | Q(peer=self.object))
        context["readiness_checks"] = checks.select_related("endpoint", "peer")[:10]
        context["readiness_form"] = ReadinessForm(endpoint=self.object)
        return context


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


def home(request: HttpRequest) -> HttpResponse:
    """The home page, "/": live and recent runs, the last events, collector health."""
    return render(request, "home.html", home_context())

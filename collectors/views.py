"""Host and event pages (thin: queries and templates; metric_series does the aggregating)."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST
from django.views.generic import DetailView, ListView

from collectors import host_charts, hosttest_series, references
from collectors.choices import DISTURBING_KINDS
from collectors.events import log_event
from collectors.filters import EventFilter
from collectors.forms import EventForm, HostTestForm
from collectors.metric_series import host_series, labelled_series
from collectors.models import Event, Host, HostTestSeries
from collectors.tasks import start_host_test_series
from collectors.windows import RANGES, chosen_window
from storageops.buckets import bucket_seconds


class HostListView(ListView):
    model = Host


class HostDetailView(DetailView):
    model = Host

    def get_queryset(self):
        return Host.objects.prefetch_related("endpoints")

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        window = chosen_window(self.request.GET, timezone.now())
        context["window"] = window
        context["range"] = window.range
        context["ranges"] = list(RANGES)
        context["metrics_query"] = (
            urlencode({"from": window.highlight[0].isoformat(), "to": window.highlight[1].isoformat()})
            if window.highlight
            else urlencode({"range": window.range})
        )
        context["charts"] = host_charts.host_page(self.object.pk, context["metrics_query"])
        context["events"] = references.attach(Event.objects.filter(host=self.object).select_related("host")[:20])
        context["test_form"] = HostTestForm()
        context["test_series"] = self.object.test_series.all()[:10]
        return context


def host_metrics(request: HttpRequest, pk: int) -> JsonResponse:
    """A host's chart series over the chosen range, and its events in that range."""
    host = get_object_or_404(Host, pk=pk)
    window = chosen_window(request.GET, timezone.now())
    start, end = window.start, window.end
    if window.range and host.created > start:
        # A host younger than the range: its few hours are drawn across the chart, not squeezed
        # into its right-hand edge (a newcomer's first look at a demo door).
        start = min(host.created - timedelta(minutes=1), end - timedelta(minutes=5))
    width = bucket_seconds(int((end - start).total_seconds()))
    events = Event.objects.filter(host=host, time__gte=start, time__lte=end).order_by("time")
    return JsonResponse(
        {
            "host": host.name,
            "bucket_seconds": width,
            "start": start.timestamp() * 1000,
            # The last bucket's point sits at its middle, up to half a bucket after now.
            "end": (end.timestamp() + width) * 1000,
            "metrics": host_series([host.pk], start, end, width),
            "labelled": labelled_series([host.pk], start, end, width, with_host=False),
            "highlight": [t.timestamp() * 1000 for t in window.highlight] if window.highlight else None,
            "events": [
                {"time": e.time.timestamp() * 1000, "kind": e.kind, "label": e.get_kind_display(),
                 "summary": e.summary, "host": None, "disturbing": e.kind in DISTURBING_KINDS}
                for e in events
            ],
        }
    )  # fmt: skip


class EventListView(ListView):
    """The change & restart timeline, filtered with the API's filterset."""

    model = Event
    paginate_by = 100

    def get_queryset(self):
        self.filterset = EventFilter(
            self.request.GET or None,
            queryset=Event.objects.select_related("host"),
        )
        return self.filterset.qs if self.filterset.is_bound and self.filterset.is_valid() else self.filterset.queryset

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["filter"] = self.filterset
        # The page's events only: their backends, endpoints and runs in one query a kind.
        context["object_list"] = references.attach(context["object_list"])
        query = self.request.GET.copy()
        query.pop("page", None)
        context["query"] = query.urlencode()
        return context


@permission_required("collectors.add_event", raise_exception=True)
def log_change(request: HttpRequest) -> HttpResponse:
    """An operator logs a change, a note or a deploy: it joins the events on every chart."""
    form = EventForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        event = log_event(
            data["kind"], data["summary"], source="operator", time=data["time"], host=data["host"],
            backend=data["backend"], endpoint=data["endpoint"], user=request.user, detail=data["detail"],
        )  # fmt: skip
        messages.success(request, f"Logged: {event.summary}")
        return redirect("collectors:event_list")
    return render(request, "collectors/event_form.html", {"form": form}, status=400 if form.errors else 200)


# -- host-test series -------------------------------------------------------------------------
@require_POST
@permission_required("collectors.add_hosttestseries", raise_exception=True)
def host_test_start(request: HttpRequest, pk: int) -> HttpResponse:
    host = get_object_or_404(Host, pk=pk)
    form = HostTestForm(request.POST)
    if not form.is_valid():
        detail = HostDetailView.as_view()
        request.method = "GET"
        response = detail(request, pk=pk)
        response.context_data["test_form"] = form
        response.status_code = 400
        return response
    series = start_host_test_series(host, form.params(), request.user)
    messages.success(request, f"Host test series #{series.pk} queued on {host.name}'s collector.")
    return redirect(series)


def _series(pk: int) -> HostTestSeries:
    return get_object_or_404(HostTestSeries.objects.select_related("host", "created_by"), pk=pk)


def host_test_detail(request: HttpRequest, pk: int) -> HttpResponse:
    series = _series(pk)
    context = {"series": series, "side_by_side": hosttest_series.hosts_side_by_side(series)}
    context.update(_results_context(series))
    return render(request, "collectors/hosttest_detail.html", context)


def _results_context(series: HostTestSeries) -> dict:
    results = list(series.results.order_by("index"))
    return {
        "series": series,
        "params": hosttest_series.all_params(series),
        "results": results,
        "write": hosttest_series.summary([r.write_bps for r in results if r.write_bps is not None]),
        **hosttest_series.read_summaries(results),
        "direct_read": hosttest_series.summary([r.direct_read_bps for r in results if r.direct_read_bps is not None]),
    }


def host_test_results(request: HttpRequest, pk: int) -> HttpResponse:
    """The results block; it polls itself while the series is live."""
    return render(request, "collectors/partials/hosttest_results.html", _results_context(_series(pk)))


def host_test_chart(request: HttpRequest, pk: int) -> JsonResponse:
    series = _series(pk)
    return JsonResponse({**hosttest_series.series_chart(series), "live": series.is_live})


@require_POST
@permission_required("collectors.change_hosttestseries", raise_exception=True)
def host_test_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    series = _series(pk)
    if hosttest_series.request_cancel(series):
        messages.success(request, "Cancel requested: the series stops after its current repeat.")
    else:
        messages.info(request, "The series had already ended.")
    return redirect(series)

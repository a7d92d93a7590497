"""Run pages: the list, the run page with its live partials, the JSON its charts read, the
error messages and the transfers table (thin: campaigns.results.charts does the work)."""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable

from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.core.exceptions import ValidationError
from django.core.serializers.json import DjangoJSONEncoder
from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.utils.html import escape
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_POST
from django.views.generic import DetailView, ListView

from campaigns import runs, sweeps
from campaigns.choices import ErrorCategory
from campaigns.models import Run, Transfer, engine_registry
from campaigns.results import analysis, baseline_choice, charts, disturbance, readers, timeline_since, verdicts
from campaigns.spec import RunSpec
from campaigns.web import chart_registry, live_snapshot, shared_partials
from campaigns.web.filters import TransferFilter
from campaigns.web.forms import BaselineChoiceForm
from storageops import conditional, row_lookups, shared_pages

TRANSFER_PAGE = 50


def _htmx(response: HttpResponse) -> HttpResponse:
    # The same URL answers a full page and a partial: caches must keep them apart.
    response["Vary"] = "HX-Request"
    return response


class RunListView(ListView):
    model = Run
    paginate_by = 50

    def get_queryset(self):
        runs_ = Run.objects.select_related("campaign")
        if self.request.GET.get("campaign", "").isdigit():
            runs_ = runs_.filter(campaign_id=int(self.request.GET["campaign"]))
        return runs_

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        query = self.request.GET.copy()
        query.pop("page", None)
        context["query"] = query.urlencode()
        return context


#: Every permission the run page's templates test (tests/dashboard/test_shared_run_page.py
#: reads them out of the templates the page renders): its rendering is shared per combination.
RUN_PAGE_PERMISSIONS = ("campaigns.cancel_run", "campaigns.start_run", "campaigns.choose_baseline")


class RunDetailView(DetailView):
    model = Run

    def get(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        """The page, rendered once a second for every viewer of the run with the same role
        (storageops.shared_pages): a data challenge's watchers arrive together."""
        if shared_pages.has_own_messages(request):
            return super().get(request, *args, **kwargs)
        pk = kwargs["pk"]
        # Its progress figures and the clock's second, as the progress partial it embeds: a run
        # that changed (or ended: the partial's reload) is rendered anew.
        figures = row_lookups.some_fields(Run, pk, ("id", *shared_partials.PROGRESS_FIELDS))
        if figures is None:
            raise Http404("No such run.")
        part = f"run:{pk}:page:{shared_pages.role_key(request, RUN_PAGE_PERMISSIONS)}"
        html = live_snapshot.once(part, shared_partials.progress_key(figures), lambda: self._shared_rendering(request))
        if html is None:
            raise Http404("No such run.")
        return HttpResponse(shared_pages.personalise(html, request))

    def _shared_rendering(self, request: HttpRequest) -> str | None:
        try:
            self.object = self.get_object()
        except Http404:
            return None
        context = self.get_context_data(object=self.object)
        context.update(shared_pages.placeholder_context(request))
        return render_to_string(self.get_template_names(), context, request=request)

    def get_queryset(self):
        # The campaign is shown; the run it retries and its retries by id only (retry_ids), and
        # who chose its baseline read only for a run someone chose for: joining the retried
        # run's whole row and prefetching the retries cost a live run's page 0.6 ms for nothing.
        return Run.objects.select_related("campaign")

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["transfer_filter_html"] = transfer_filter_html()
        # A live run shows its progress and charts; its result tables come when it ends.
        context["result"] = readers.stored(self.object)
        context["disturbance"] = disturbance.left_out_note(self.object, context["result"])
        context["byte_budget"] = readers.byte_budget(self.object)
        context["retryable"] = runs.retryable_count(self.object)
        context["retry_ids"] = list(
            Run.objects.filter(retry_of_id=self.object.pk).order_by("pk").values_list("pk", flat=True)
        )
        # A run that is no retry and has none has no chain to read.
        chained = self.object.retry_of_id or context["retry_ids"]
        context["chain"] = readers.retry_chain(self.object) if chained else None
        context["progress_html"] = mark_safe(_progress_html(self.object))  # noqa: S308 -- our own template's output
        context["target_rate_bps"] = verdicts.target_rate_bps(self.object)
        context["swept"] = [(axis, sweeps.AXIS_LABELS[axis]) for axis in RunSpec.of(self.object).swept_axes]
        context["charts_html"] = chart_registry.run_page_html(self.object.pk, tuple(context["swept"]))
        context["engine_results_template"] = engine_registry.results_template(RunSpec.of(self.object).engine)
        context["client_rows"] = analysis.client_rows(self.object.summary or {})
        context["baseline"] = baseline_choice.standing(self.object)
        context["baseline_form"] = BaselineChoiceForm(
            initial={"choice": self.object.baseline_choice, "reason": self.object.baseline_reason}
        )
        return context


@functools.cache
def transfer_filter_html() -> str:
    """The run page's transfer filter (state, error category, step): the same for every run and
    viewer, so rendered once per process (Django's template widgets took a millisecond a page)."""
    form = TransferFilter(queryset=Transfer.objects.none()).form
    fields = (form[name] for name in ("state", "error_category", "step"))
    return mark_safe("".join(f"<label>{escape(f.label)} {f}</label>" for f in fields))  # noqa: S308 -- escaped, widgets


def _progress_html(run: Run, full: Callable[[], Run] | None = None) -> str:
    """The run's progress partial, shared by its viewers (campaigns.web.shared_partials); `full`
    gives the whole run to render from when `run` holds only the fields the sharing reads."""

    def rendered() -> str:
        nonlocal run
        if full is not None:
            run = full()
        in_flight = readers.oldest_in_flight(run) if run.is_live else []
        # A live run's steps with the concurrency each achieved so far (its buckets, shared for 10 s).
        live_steps = readers.steps(run) if run.is_live else []
        context = {"run": run, "in_flight": in_flight, "live_steps": live_steps}
        return render_to_string("campaigns/partials/run_progress.html", context)

    return shared_partials.progress(run, rendered)


def run_progress(request: HttpRequest, pk: int) -> HttpResponse:
    """The live progress partial; it stops asking to be polled once the run has ended.

    Every viewer of a live run polls it every 2 s, and it reads the same for all of them (no
    user, form or permission in it): one rendering is shared by the viewers who ask while the
    run's own figures and the clock's second are unchanged (campaigns.web.shared_partials)."""
    # Asked every 2 s by every viewer: the run's progress figures alone, by a statement made once,
    # answer the viewers a rendering is shared with; the whole run is read only to render anew.
    run = row_lookups.some_fields(Run, pk, ("id", *shared_partials.PROGRESS_FIELDS))
    if run is None:
        raise Http404("No such run.")
    html = _progress_html(run, lambda: Run.objects.select_related("campaign").get(pk=pk))
    # A viewer whose page shows this rendering already is told so (304): the same for every role.
    response = _htmx(conditional.answer(request, html.encode(), "text/html; charset=utf-8"))
    if request.headers.get("HX-Request") and not run.is_live:
        # The run just ended while the page watched it: reload once for the result tables.
        response["HX-Refresh"] = "true"
    return response


@require_POST
@permission_required("campaigns.cancel_run", raise_exception=True)
def run_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(Run, pk=pk)
    if runs.request_cancel(run, user=request.user):
        grace = RunSpec.of(run).cancel_grace
        messages.success(request, f"Cancel requested for run #{run.pk}; copies in flight get {grace} s to finish.")
    else:
        messages.error(request, f"Run #{run.pk} is {run.state}: there is nothing to cancel.")
    return redirect(run)


@require_POST
@permission_required("campaigns.start_run", raise_exception=True)
def run_retry_failed(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(Run, pk=pk)
    try:
        retry = runs.retry_failed(run, user=request.user, trigger="web")
    except ValidationError as exc:
        for message in exc.messages:
            messages.error(request, f"Cannot retry run #{run.pk}: {message}")
        return redirect(run)
    messages.success(
        request,
        f"Run #{retry.pk} queued: it retries the {retry.planned_files} failed transfers of run #{run.pk}.",
    )
    return redirect(retry)


def run_chart(request: HttpRequest, pk: int, name: str) -> HttpResponse:
    """One small JSON document of the run page's charts (chart_registry.RUN_DOCUMENTS); `live`
    tells the page whether to ask again.

    Every viewer of a run polls these every 5 s: each is computed once a second for all of them
    (campaigns.web.live_snapshot), answered 304 to a viewer who has it, and the timeline, asked
    with `since` and `bucket`, is sent from the viewer's last point on (timeline_since)."""
    if name not in chart_registry.RUN_DOCUMENTS:
        raise Http404("No such chart.")
    shared = live_snapshot.once(f"run:{pk}:chart:{name}", live_snapshot.tick(), lambda: _chart_snapshot(pk, name))
    if shared is None:
        raise Http404("No such run.")
    body, etag, doc = shared
    since, bucket = _since(request)
    if since is not None and doc is not None:
        body, etag = _json(timeline_since.after(doc, since, bucket))
    return conditional.answer(request, body, "application/json", etag)


def run_charts_bundle(request: HttpRequest, pk: int) -> HttpResponse:
    """The run page's chart documents in one answer, {"docs": {name: document}}: the page asks
    for all of them every 5 s, and one request instead of six is most of what a poll costs the
    site (a request's session, user and role checks, not the shared documents, took its time).
    `names` picks documents (default: all); the timeline is cut at `since` as in run_chart."""
    asked = request.GET.get("names", "")
    names = [n for n in asked.split(",") if n in chart_registry.RUN_DOCUMENTS] if asked else None
    shared = live_snapshot.once(f"run:{pk}:bundle", live_snapshot.tick(), lambda: _bundle_snapshot(pk))
    if shared is None:
        raise Http404("No such run.")
    parts, timeline = shared
    since, bucket = _since(request)
    if since is not None and timeline is not None:
        parts = {**parts, "timeline": _json(timeline_since.after(timeline, since, bucket))[0]}
    chosen = names if names is not None else list(parts)
    body = b'{"docs":{' + b",".join(json.dumps(n).encode() + b":" + parts[n] for n in chosen) + b"}}"
    return conditional.answer(request, body, "application/json")


def _bundle_snapshot(pk: int) -> tuple[dict[str, bytes], dict | None] | None:
    """Every document's JSON for this second, and the timeline itself (to cut at a `since`)."""
    run = Run.objects.select_related("campaign").filter(pk=pk).first()
    if run is None:
        return None
    docs = {name: chart_registry.run_document(run, name) for name in chart_registry.RUN_DOCUMENTS}
    return {name: _json(doc)[0] for name, doc in docs.items()}, docs.get("timeline")


# The documents a viewer may ask from its last point on.
_SINCE_DOCUMENTS = frozenset({"timeline"})


def _chart_snapshot(pk: int, name: str) -> tuple[bytes, str, dict | None] | None:
    """A document as every viewer of this second gets it: its JSON and tag, and the document
    itself for those a viewer may ask in part; None when there is no such run."""
    run = Run.objects.select_related("campaign").filter(pk=pk).first()
    if run is None:
        return None
    doc = chart_registry.run_document(run, name)
    return (*_json(doc), doc if name in _SINCE_DOCUMENTS else None)


def _json(doc: dict) -> tuple[bytes, str]:
    body = json.dumps(doc, cls=DjangoJSONEncoder).encode()
    return body, conditional.etag_of(body)


def _since(request: HttpRequest) -> tuple[float | None, float | None]:
    """The viewer's last point's time and the bucket width it holds (None: the whole document)."""
    try:
        since = float(request.GET["since"])
        bucket = float(request.GET.get("bucket", "nan"))
    except (KeyError, ValueError):
        return None, None
    return (since, bucket) if math.isfinite(since) else (None, None)


def run_errors(request: HttpRequest, pk: int, category: str) -> HttpResponse:
    """The raw messages behind one bar of the error mix (an htmx partial)."""
    if category not in ErrorCategory.values:
        raise Http404("No such error category.")
    run = get_object_or_404(Run, pk=pk)
    context = {
        "run": run,
        "category": ErrorCategory(category).label,
        "category_value": category,
        "rows": charts.error_messages(run, category),
    }
    return _htmx(render(request, "campaigns/partials/error_messages.html", context))


def run_transfers(request: HttpRequest, pk: int) -> HttpResponse:
    """A page of the transfers table, filtered with the API's filterset. Keyset paging on
    the transfer index: page 5,000 of a big run costs what page 1 does, and no count(*).

    The first page unfiltered is what every run page loads as it opens (hx-trigger="load"), and it
    is the same for every viewer: rendered once a second for all of them (live_snapshot)."""
    if not request.GET:
        html = live_snapshot.once(f"run:{pk}:transfers", live_snapshot.tick(), lambda: _transfers_html(pk))
        if html is None:
            raise Http404("No such run.")
        return _htmx(conditional.answer(request, html.encode(), "text/html; charset=utf-8"))
    return _htmx(render(request, "campaigns/partials/transfers.html", _transfers_context(pk, request.GET)))


def _transfers_html(pk: int) -> str | None:
    """The unfiltered first page, rendered for every viewer (None: no such run)."""
    try:
        return render_to_string("campaigns/partials/transfers.html", _transfers_context(pk, QueryDict()))
    except Http404:
        return None


def _transfers_context(pk: int, query_in: QueryDict) -> dict:
    run = get_object_or_404(Run, pk=pk)
    filterset = TransferFilter(query_in, queryset=Transfer.objects.filter(run=run).order_by("index"))
    rows: list[Transfer] = []
    after = query_in.get("after", "")
    if filterset.is_valid():
        queryset = filterset.qs
        if after.lstrip("-").isdigit():
            queryset = queryset.filter(index__gt=int(after))
        rows = list(
            queryset.only(
                "index", "step", "state", "attempt", "source", "destination", "size", "started_at", "duration",
                "throughput_bps", "copy_mode", "error_category", "error_message", "run_id",
            )[: TRANSFER_PAGE + 1]
        )  # fmt: skip
    query = query_in.copy()
    query.pop("after", None)
    return {
        "run": run,
        "filter": filterset,
        "rows": rows[:TRANSFER_PAGE],
        "next_after": rows[TRANSFER_PAGE - 1].index if len(rows) > TRANSFER_PAGE else None,
        "query": query.urlencode(),
        "first_page": not after,
    }

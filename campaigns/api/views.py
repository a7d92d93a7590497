"""API views of the campaigns app: thin, the logic is in campaigns.runs."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db.models.fields.json import KT
from django.http import StreamingHttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.pagination import CursorPagination
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from campaigns import editing, readiness, runs
from campaigns.api import shared_reads
from campaigns.api.serializers import (
    BackendSerializer,
    BaselineChoiceSerializer,
    CampaignScheduleSerializer,
    CampaignSerializer,
    EndpointSerializer,
    ReadinessCheckSerializer,
    RunListSerializer,
    RunSerializer,
    TokenIssuerSerializer,
    TransferSerializer,
)
from campaigns.models import (
    Backend,
    Campaign,
    CampaignSchedule,
    Endpoint,
    ReadinessCheck,
    Run,
    TokenIssuer,
    Transfer,
    transfer_extras,
)
from campaigns.readiness import lease as readiness_lease
from campaigns.reports import content as report_content
from campaigns.reports import download as report_download
from campaigns.results import baseline_choice, comparison, exports, readers
from campaigns.runs import scheduling
from campaigns.web import compare_views
from campaigns.web.filters import TransferFilter
from campaigns.web.forms import CompareForm
from storageops.api.auth import RolePermission
from storageops.api.base import BaseViewSet


class BackendViewSet(BaseViewSet):
    queryset = Backend.objects.all()
    serializer_class = BackendSerializer
    filterset_fields = ["name", "access_layer"]


class EndpointViewSet(BaseViewSet):
    queryset = Endpoint.objects.select_related("backend").prefetch_related("hosts")
    serializer_class = EndpointSerializer
    filterset_fields = ["name", "backend", "backend__name"]


class TokenIssuerViewSet(BaseViewSet):
    queryset = TokenIssuer.objects.all()
    serializer_class = TokenIssuerSerializer
    filterset_fields = ["name"]


class CloneSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100, help_text="The new campaign's name.")


class CampaignViewSet(BaseViewSet):
    queryset = Campaign.objects.prefetch_related("sources", "destinations", "clients")
    serializer_class = CampaignSerializer
    filterset_fields = ["name", "kind", "engine"]
    action_permissions = {"start": ["campaigns.start_run"], "clone": ["campaigns.add_campaign"]}

    def list(self, request, *args, **kwargs):
        """Campaigns; the list is shared by every client of the moment (shared_reads)."""
        listed = super().list
        moment = lambda: shared_reads.list_moment("campaigns")  # noqa: E731
        return shared_reads.shared(request, self, moment, lambda: listed(request, *args, **kwargs))

    @extend_schema(request=None, responses={202: RunSerializer})
    @action(detail=True, methods=["post"])
    def start(self, request, pk=None):
        """Start a run of this campaign; it is queued for a transfers worker."""
        run = runs.start_run(self.get_object(), user=request.user, trigger="api")
        return Response(RunSerializer(run, context={"request": request}).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=CloneSerializer, responses={201: CampaignSerializer})
    @action(detail=True, methods=["post"])
    def clone(self, request, pk=None):
        """Copy this campaign, endpoints included, under a new name."""
        body = CloneSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        copy = editing.clone_campaign(self.get_object(), body.validated_data["name"])
        return Response(CampaignSerializer(copy, context={"request": request}).data, status=status.HTTP_201_CREATED)


class CampaignScheduleViewSet(BaseViewSet):
    """A campaign's schedule; beat's task follows every change (campaigns.scheduling)."""

    queryset = CampaignSchedule.objects.select_related("campaign")
    serializer_class = CampaignScheduleSerializer
    filterset_fields = ["campaign", "campaign__name", "enabled", "kind"]

    def perform_create(self, serializer):
        serializer.instance = scheduling.save_schedule(CampaignSchedule(**serializer.validated_data))

    def perform_update(self, serializer):
        schedule = serializer.instance
        for key, value in serializer.validated_data.items():
            setattr(schedule, key, value)
        scheduling.save_schedule(schedule)

    def perform_destroy(self, instance):
        scheduling.delete_schedule(instance)


class RunViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Runs: the list gives each run's state, counters and headlines; one run gives everything."""

    queryset = Run.objects.select_related("campaign", "started_by").prefetch_related("retries")
    serializer_class = RunSerializer
    permission_classes = [RolePermission]
    filterset_fields = ["campaign", "campaign__name", "state", "disturbed"]
    action_permissions = {
        "cancel": ["campaigns.cancel_run"],
        "cleanup": ["campaigns.start_run"],
        "retry_failed": ["campaigns.start_run"],
        "baseline": ["campaigns.choose_baseline"],
        "judge_again": ["campaigns.choose_baseline"],
    }

    def get_serializer_class(self):
        return RunListSerializer if self.action == "list" else RunSerializer

    def retrieve(self, request, *args, **kwargs):
        """One run; a live one's answer is shared by every client of the moment (shared_reads)."""
        one = super().retrieve
        moment = lambda: shared_reads.live_run_moment(kwargs.get("pk"))  # noqa: E731
        return shared_reads.shared(request, self, moment, lambda: one(request, *args, **kwargs))

    def list(self, request, *args, **kwargs):
        """Runs; the list is shared by every client of the moment (shared_reads)."""
        listed = super().list
        moment = lambda: shared_reads.list_moment("runs")  # noqa: E731
        return shared_reads.shared(request, self, moment, lambda: listed(request, *args, **kwargs))

    def get_queryset(self):
        if self.action != "list":
            return super().get_queryset()
        # The big JSON columns stay in the database; the few keys a list shows come out of them there.
        return (
            super()
            .get_queryset()
            .defer("snapshot", "versions", "summary")
            .annotate(
                verdict_status=KT("summary__verdict__status"),
                verdict_headline=KT("summary__verdict__headline"),
                judgement_status=KT("summary__judgement__status"),
                judgement_headline=KT("summary__judgement__headline"),
                transfers_deleted=KT("summary__archived__transfers_deleted"),
                not_needed=KT("summary__not_needed"),
                final_throughput_bps=KT("summary__total__throughput_bps"),
            )
        )

    @extend_schema(request=None, responses={202: RunSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        """Ask the run to stop; in-flight copies get the campaign's grace time."""
        run = self.get_object()
        if not runs.request_cancel(run, user=request.user):
            raise ValidationError({"state": f"A run that is {run.state} cannot be cancelled."})
        run.refresh_from_db()
        return Response(RunSerializer(run, context={"request": request}).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=None, responses={202: RunSerializer})
    @action(detail=True, methods=["post"])
    def cleanup(self, request, pk=None):
        """Delete the files the run wrote (only below its run folder); the report lands in its summary."""
        run = self.get_object()
        if run.is_live:
            raise ValidationError({"state": f"A run that is {run.state} cannot be cleaned up yet."})
        from campaigns.tasks import cleanup_run

        cleanup_run.delay(run.pk)
        return Response(RunSerializer(run, context={"request": request}).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=None, responses={201: RunSerializer})
    @action(detail=True, methods=["post"], url_path="retry-failed")
    def retry_failed(self, request, pk=None):
        """Re-drive the run's transfers that did not succeed (failed, timed out, skipped, cancelled)
        as a new run linked to it (its retry_of); 400 when the run is live, already retried, or
        has nothing to retry."""
        retry = runs.retry_failed(self.get_object(), user=request.user, trigger="api")
        return Response(RunSerializer(retry, context={"request": request}).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=BaselineChoiceSerializer, responses={200: RunSerializer})
    @action(detail=True, methods=["post"])
    def baseline(self, request, pk=None):
        """Include the ended run in its campaign's baselines (a partial or disturbed run known to be
        sound), leave it out (a night known not to be the storage's), or leave it to the rule; later
        runs are judged so. 400 when the run is live, a retry, or failed, or no reason is given."""
        choice = BaselineChoiceSerializer(data=request.data)
        choice.is_valid(raise_exception=True)
        run = baseline_choice.choose(self.get_object(), **choice.validated_data, user=request.user)
        return Response(RunSerializer(run, context={"request": request}).data)

    @extend_schema(request=None, responses={200: RunSerializer})
    @action(detail=True, methods=["post"], url_path="judge-again")
    def judge_again(self, request, pk=None):
        """Judge the ended run against its baseline as the choices make it now; the judgement it
        replaces is kept in judgement.earlier, with who judged again and when."""
        run = self.get_object()
        baseline_choice.judge_again(run, user=request.user)
        return Response(RunSerializer(run, context={"request": request}).data)

    @extend_schema(
        parameters=[OpenApiParameter("as", str, enum=["csv", "json"], description="Export format (default csv).")],
        responses={(200, "text/csv"): OpenApiTypes.STR, (200, "application/json"): OpenApiTypes.OBJECT},
    )
    @action(detail=True, methods=["get"], url_path="export")
    def export(self, request, pk=None):
        """Every transfer of the run, streamed (a 500,000-transfer run is never held in memory)."""
        run = self.get_object()
        kind = request.query_params.get("as", "csv")
        if kind not in ("csv", "json"):
            raise ValidationError({"as": "Use csv or json."})
        stream = exports.transfers_csv(run) if kind == "csv" else exports.transfers_json(run)
        response = StreamingHttpResponse(stream, content_type="text/csv" if kind == "csv" else "application/json")
        response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-transfers.{kind}"'
        return response

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    @action(detail=True, methods=["get"])
    def verdict(self, request, pk=None):
        """Knee, saturation per step and door, bottleneck and capacity, computed now from the
        rows (a live run's so far; a finished run's with the hosts' current link speeds)."""
        return Response(readers.verdict(self.get_object(), recompute=True))

    @extend_schema(responses={(200, "text/csv"): OpenApiTypes.STR})
    @action(detail=True, methods=["get"], url_path="steps-csv")
    def steps_csv(self, request, pk=None):
        """The step table of the run as CSV."""
        run = self.get_object()
        response = StreamingHttpResponse(exports.steps_csv(run), content_type="text/csv")
        response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-steps.csv"'
        return response


class ReadinessCheckViewSet(
    mixins.CreateModelMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    """Readiness checks: POST {"endpoint": id, "peer": id or null} queues one for a transfers worker
    (202, state queued); GET it until its state is passed or failed."""

    queryset = ReadinessCheck.objects.select_related("endpoint", "peer")
    serializer_class = ReadinessCheckSerializer
    permission_classes = [RolePermission]
    filterset_fields = ["endpoint", "peer", "state", "grid"]
    action_permissions = {"cancel": ["campaigns.add_readinesscheck"]}

    @extend_schema(request=None, responses={202: ReadinessCheckSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        """Stop the check: a queued one ends at once; a running one within a second, its step's
        gfal2 call cancelled and its files removed (state cancelled)."""
        check = self.get_object()
        if not readiness_lease.request_cancel(check):
            raise ValidationError({"state": f"A check that is {check.state} cannot be cancelled."})
        check.refresh_from_db()
        return Response(self.get_serializer(check).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(responses={202: ReadinessCheckSerializer})
    def create(self, request, *args, **kwargs):
        body = self.get_serializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        check = readiness.start(data["endpoint"], data.get("peer"), user=request.user)
        return Response(self.get_serializer(check).data, status=status.HTTP_202_ACCEPTED)


class ComparisonView(APIView):
    """Runs side by side: GET /api/v1/compare/?runs=1,2,3 (or ?campaign=ID for the latest run
    of each backend of that campaign's runs)."""

    permission_classes = [RolePermission]

    def get_queryset(self):
        # For RolePermission: reading a comparison needs what reading runs needs.
        return Run.objects.none()

    @extend_schema(
        parameters=[
            OpenApiParameter("runs", str, description="Comma-separated run ids (1 to 8)."),
            OpenApiParameter("campaign", int, description="Or: the latest finished run per backend of a campaign."),
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request):
        runs_param, campaign = request.query_params.get("runs", ""), request.query_params.get("campaign", "")
        try:
            ids = [int(x) for x in runs_param.split(",") if x.strip()]
        except ValueError:
            raise ValidationError({"runs": "Give run ids separated by commas, e.g. 12,15."}) from None
        if not ids and not campaign.isdigit():
            raise ValidationError({"runs": "Give runs=ID,ID… or campaign=ID."})
        selected = comparison.select_runs(ids, int(campaign) if not ids else None)
        return Response(comparison.compare(selected))


class _ReportView(APIView):
    """A report file (campaigns.reports): HTML, or PDF where `as_pdf` (503 with the reason when
    the server has no Chromium)."""

    permission_classes = [RolePermission]
    as_pdf = False

    def get_queryset(self):
        # For RolePermission: a report reads what reading runs needs.
        return Run.objects.select_related("campaign")

    def perform_content_negotiation(self, request, force=False):
        # The report is a file whatever the client accepts; errors (400, 401, 403, 404) stay JSON.
        renderer = JSONRenderer()
        return renderer, renderer.media_type


_REPORT_RESPONSES = {(200, "text/html"): OpenApiTypes.STR, (200, "application/pdf"): OpenApiTypes.BINARY}


class RunReportView(_ReportView):
    """A run's report as one self-contained file: GET /api/v1/runs/{id}/report.html (opens
    offline, charts drawn from data inside it) or …/report.pdf (the same printed by Chromium)."""

    @extend_schema(responses=_REPORT_RESPONSES)
    def get(self, request, pk: int):
        run = get_object_or_404(self.get_queryset(), pk=pk)
        return report_download.response(report_content.run_report(run, request.user), self.as_pdf, api=True)


class RunReportPdfView(RunReportView):
    __doc__ = RunReportView.__doc__
    as_pdf = True


class CampaignReportView(_ReportView):
    """A campaign's history as a report: GET /api/v1/campaigns/{id}/report.html (every ended
    run's figures against the bands they were judged with, the history chart with every figure
    it offers) or …/report.pdf."""

    @extend_schema(responses=_REPORT_RESPONSES)
    def get(self, request, pk: int):
        campaign = get_object_or_404(Campaign, pk=pk)
        return report_download.response(report_content.history_report(campaign, request.user), self.as_pdf, api=True)


class CampaignReportPdfView(CampaignReportView):
    __doc__ = CampaignReportView.__doc__
    as_pdf = True


class ComparisonReportView(_ReportView):
    """A comparison's report: GET /api/v1/compare/report.html?runs=1,2,3 (or campaign=ID), with
    the compare page's trim (warmup, tail, margin seconds) and "steps against" (x); …/report.pdf
    for the PDF."""

    @extend_schema(
        parameters=[
            OpenApiParameter("runs", str, description="Comma-separated run ids (1 to 8)."),
            OpenApiParameter("campaign", int, description="Or: the latest finished run per backend of a campaign."),
            OpenApiParameter("warmup", int, description="Seconds left out at each run's start."),
            OpenApiParameter("tail", int, description="Seconds left out at each run's end."),
            OpenApiParameter("margin", int, description="Seconds left out around each disturbing event."),
            OpenApiParameter("x", str, description="Steps against: concurrency or a swept setting."),
        ],
        responses=_REPORT_RESPONSES,
    )
    def get(self, request):
        form = CompareForm(request.query_params)
        if not form.is_valid():
            raise ValidationError({k: [str(m) for m in v] for k, v in form.errors.items()})
        shown = compare_views.compared(form)
        return report_download.response(report_content.comparison_report(shown, request.user), self.as_pdf, api=True)


class ComparisonReportPdfView(ComparisonReportView):
    __doc__ = ComparisonReportView.__doc__
    as_pdf = True


class TransferCursor(CursorPagination):
    # Keyset pagination: page 5,000 of a 500,000-transfer run costs what page 1 does.
    ordering = "id"
    page_size = 500
    page_size_query_param = "limit"
    max_page_size = 5000


class TransferViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    queryset = Transfer.objects.all()
    serializer_class = TransferSerializer
    permission_classes = [RolePermission]
    pagination_class = TransferCursor
    filterset_class = TransferFilter

    def get_queryset(self):
        # The engines' columns of a transfer (transfer_extras) in the same query, not one a row.
        # (select_related() without a name would follow every foreign key.)
        relations = transfer_extras.relations()
        transfers = super().get_queryset()
        return transfers.select_related(*relations) if relations else transfers

    def list(self, request, *args, **kwargs):
        """Transfers; those of one live run are shared by every client of the moment (shared_reads)."""
        runs_asked = request.query_params.getlist("run")
        moment = lambda: shared_reads.live_run_moment(runs_asked[0]) if len(runs_asked) == 1 else None  # noqa: E731
        listed = super().list
        return shared_reads.shared(request, self, moment, lambda: listed(request, *args, **kwargs))

"""API views of the campaigns app: thin, the logic is in campaigns.runs."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.pagination import CursorPagination
from rest_framework.response import Response

from campaigns import runs
from campaigns.api.serializers import (
    BackendSerializer,
    CampaignSerializer,
    EndpointSerializer,
    RunSerializer,
    TransferSerializer,
)
from campaigns.models import Backend, Campaign, Endpoint, Run, Transfer
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


class CloneSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100, help_text="The new campaign's name.")


class CampaignViewSet(BaseViewSet):
    queryset = Campaign.objects.prefetch_related("sources", "destinations")
    serializer_class = CampaignSerializer
    filterset_fields = ["name", "kind", "engine"]
    action_permissions = {"start": ["campaigns.start_run"], "clone": ["campaigns.add_campaign"]}

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
        original = self.get_object()
        with transaction.atomic():
            copy = Campaign.objects.get(pk=original.pk)
            copy.pk = None
            copy.name = body.validated_data["name"]
            copy.save()
            copy.sources.set(original.sources.all())
            copy.destinations.set(original.destinations.all())
        return Response(CampaignSerializer(copy, context={"request": request}).data, status=status.HTTP_201_CREATED)


class RunViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    queryset = Run.objects.select_related("campaign")
    serializer_class = RunSerializer
    permission_classes = [RolePermission]
    filterset_fields = ["campaign", "campaign__name", "state", "disturbed"]
    action_permissions = {"cancel": ["campaigns.cancel_run"]}

    @extend_schema(request=None, responses={202: RunSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        """Ask the run to stop; in-flight copies get the campaign's grace time."""
        run = self.get_object()
        if not runs.request_cancel(run, user=request.user):
            raise ValidationError({"state": f"A run that is {run.state} cannot be cancelled."})
        run.refresh_from_db()
        return Response(RunSerializer(run, context={"request": request}).data, status=status.HTTP_202_ACCEPTED)


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
    filterset_fields = {
        "run": ["exact"],
        "state": ["exact"],
        "error_category": ["exact"],
        "step": ["exact"],
        "source_endpoint": ["exact"],
        "destination_endpoint": ["exact"],
        "finished_at": ["gte", "lte"],
    }

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.response import Response

from collectors import hosttest_series
from collectors.api.serializers import (
    EventSerializer,
    HostSerializer,
    HostTestRequestSerializer,
    HostTestSeriesSerializer,
    MetricSampleSerializer,
)
from collectors.filters import EventFilter
from collectors.models import Event, Host, HostTestSeries, MetricSample
from collectors.tasks import start_host_test_series
from storageops.api.auth import RolePermission, has_perm
from storageops.api.base import BaseViewSet


class HostViewSet(BaseViewSet):
    queryset = Host.objects.all()
    serializer_class = HostSerializer
    filterset_fields = ["name", "role"]
    action_permissions = {"tests": ["collectors.view_hosttestseries"]}

    @extend_schema(
        methods=["GET"], request=None, responses={200: HostTestSeriesSerializer(many=True)},
        description="The host's test series, newest first (results left out: see /api/v1/host-tests/{id}/).",
    )  # fmt: skip
    @extend_schema(
        methods=["POST"], request=HostTestRequestSerializer, responses={201: HostTestSeriesSerializer},
        description="Start a host-test series on the host's collector (operator).",
    )  # fmt: skip
    @action(detail=True, methods=["get", "post"])
    def tests(self, request, pk=None):
        host = self.get_object()
        if request.method == "GET":
            page = self.paginate_queryset(host.test_series.all())
            listed = HostTestSeriesSerializer(page, many=True, context={"request": request, "results": False}).data
            return self.get_paginated_response(listed)
        if not has_perm(request, "collectors.add_hosttestseries"):
            raise PermissionDenied("Starting a host test needs the operator role.")
        body = HostTestRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            series = start_host_test_series(host, body.validated_data["params"], request.user)
        except DjangoValidationError as exc:
            raise ValidationError({"params": exc.messages}) from None
        return Response(HostTestSeriesSerializer(series, context={"request": request}).data, status=201)


class HostTestSeriesViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    queryset = HostTestSeries.objects.select_related("host")
    serializer_class = HostTestSeriesSerializer
    permission_classes = [RolePermission]
    filterset_fields = ["host", "host__name", "state", "tool"]
    action_permissions = {"cancel": ["collectors.change_hosttestseries"]}

    def get_serializer_context(self) -> dict:
        context = super().get_serializer_context()
        if self.action == "list":
            context["results"] = False
        return context

    @extend_schema(request=None, responses={202: HostTestSeriesSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        """Stop the series after its current repeat."""
        series = self.get_object()
        if not hosttest_series.request_cancel(series):
            raise ValidationError({"state": f"A series that is {series.state} cannot be cancelled."})
        series.refresh_from_db()
        return Response(HostTestSeriesSerializer(series, context={"request": request}).data, status=202)


class EventViewSet(mixins.CreateModelMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    queryset = Event.objects.select_related("host")
    serializer_class = EventSerializer
    permission_classes = [RolePermission]
    filterset_class = EventFilter


class MetricSampleViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    queryset = MetricSample.objects.order_by("time")
    serializer_class = MetricSampleSerializer
    permission_classes = [RolePermission]
    filterset_fields = {
        "host": ["exact"],
        "host__name": ["exact"],
        "metric": ["exact"],
        "label": ["exact"],
        "time": ["gte", "lte"],
    }

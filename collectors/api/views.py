from __future__ import annotations

from rest_framework import mixins, viewsets

from collectors.api.serializers import EventSerializer, HostSerializer, MetricSampleSerializer
from collectors.filters import EventFilter
from collectors.models import Event, Host, MetricSample
from storageops.api.auth import RolePermission
from storageops.api.base import BaseViewSet


class HostViewSet(BaseViewSet):
    queryset = Host.objects.all()
    serializer_class = HostSerializer
    filterset_fields = ["name", "role"]


class EventViewSet(mixins.CreateModelMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    queryset = Event.objects.select_related("host", "backend", "endpoint", "run")
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

"""Filtersets shared by the API and the events timeline page."""

from __future__ import annotations

import django_filters

from collectors.choices import EventKind, EventSource
from collectors.models import Event


class EventFilter(django_filters.FilterSet):
    kind = django_filters.ChoiceFilter(choices=EventKind.choices)
    source = django_filters.ChoiceFilter(choices=EventSource.choices)
    host__name = django_filters.CharFilter(field_name="host__name", label="Host name")
    time__gte = django_filters.IsoDateTimeFilter(field_name="time", lookup_expr="gte", label="From")
    time__lte = django_filters.IsoDateTimeFilter(field_name="time", lookup_expr="lte", label="Until")

    class Meta:
        model = Event
        fields = ["kind", "source", "host", "host__name", "backend", "endpoint", "run"]

"""Filtersets shared by the API and the events timeline page."""

from __future__ import annotations

import django_filters

from collectors import references
from collectors.choices import EventKind, EventSource
from collectors.models import Event


class EventFilter(django_filters.FilterSet):
    kind = django_filters.ChoiceFilter(choices=EventKind.choices)
    source = django_filters.ChoiceFilter(choices=EventSource.choices)
    host__name = django_filters.CharFilter(field_name="host__name", label="Host name")
    # Backends, endpoints and runs are referred to by id (collectors.references): by id here,
    # by name through the resolvers their app registered.
    backend = django_filters.NumberFilter(field_name="backend_id", label="Backend (id)")
    endpoint = django_filters.NumberFilter(field_name="endpoint_id", label="Endpoint (id)")
    run = django_filters.NumberFilter(field_name="run_id", label="Run (id)")
    backend__name = django_filters.CharFilter(method="_named", label="Backend name")
    endpoint__name = django_filters.CharFilter(method="_named", label="Endpoint name")
    run__name = django_filters.CharFilter(method="_named", label="Run's campaign name")
    time__gte = django_filters.IsoDateTimeFilter(field_name="time", lookup_expr="gte", label="From")
    time__lte = django_filters.IsoDateTimeFilter(field_name="time", lookup_expr="lte", label="Until")

    class Meta:
        model = Event
        fields = ["kind", "source", "host", "host__name", "backend", "endpoint", "run"]

    def _named(self, queryset, name, value):
        kind = name.removesuffix("__name")
        return queryset.filter(**{f"{kind}_id__in": references.ids_named(kind, value)})

"""Filtersets shared by the API and the pages' htmx tables: one vocabulary of filters."""

from __future__ import annotations

import django_filters

from campaigns.choices import ErrorCategory, TransferState
from campaigns.models import Transfer


class TransferFilter(django_filters.FilterSet):
    state = django_filters.ChoiceFilter(choices=TransferState.choices)
    error_category = django_filters.ChoiceFilter(choices=[c for c in ErrorCategory.choices if c[0]])
    finished_at__gte = django_filters.IsoDateTimeFilter(field_name="finished_at", lookup_expr="gte")
    finished_at__lte = django_filters.IsoDateTimeFilter(field_name="finished_at", lookup_expr="lte")

    class Meta:
        model = Transfer
        fields = ["run", "state", "error_category", "step", "source_endpoint", "destination_endpoint"]

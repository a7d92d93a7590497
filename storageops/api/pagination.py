"""Limit/offset pages with bounds: a page holds at most MAX_LIMIT objects, and an offset past
what PostgreSQL's bigint can hold is refused instead of failing in the database."""

from __future__ import annotations

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination

MAX_LIMIT = 1000
MAX_OFFSET = 2**63 - 1  # OFFSET is a bigint in PostgreSQL


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    max_limit = MAX_LIMIT

    def get_offset(self, request) -> int:
        offset = super().get_offset(request)
        if offset > MAX_OFFSET:
            raise ValidationError({self.offset_query_param: [f"Give an offset from 0 to {MAX_OFFSET}."]})
        return offset

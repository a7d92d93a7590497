"""The read side for Grafana: events in the annotation shape of a JSON datasource.

Grafana's JSON datasource POSTs {"range": {"from": ISO, "to": ISO}, "annotation": {...}} to
/annotations; a viewer account authenticates with HTTP basic auth from the datasource.
"""

from __future__ import annotations

from datetime import datetime

from django.utils.dateparse import parse_datetime
from drf_spectacular.utils import extend_schema
from rest_framework.authentication import BasicAuthentication, SessionAuthentication
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from collectors.grafana import datasource_annotations


def _when(value) -> datetime | None:
    if value in (None, ""):
        return None
    if isinstance(value, (int, float)) or str(value).isdigit():
        return datetime.fromtimestamp(int(value) / 1000).astimezone()
    return parse_datetime(str(value))


@extend_schema(exclude=True)  # Grafana's own protocol, documented in docs/api.md
class GrafanaAnnotations(APIView):
    authentication_classes = [BasicAuthentication, SessionAuthentication]
    permission_classes = [IsAuthenticated]

    def _answer(self, start, end, tag_text: str) -> Response:
        start, end = _when(start), _when(end)
        if start is None or end is None or end < start:
            raise ValidationError(
                {"range": ["Give a time range: from and to as ISO 8601 or epoch milliseconds, from <= to."]}
            )
        if not self.request.user.has_perm("collectors.view_event"):
            raise PermissionDenied("Your role cannot read events.")
        tag_filter = [t.strip() for t in tag_text.split(",") if t.strip()]
        return Response(datasource_annotations(start, end, tag_filter))

    def get(self, request: Request) -> Response:
        return self._answer(request.query_params.get("from"), request.query_params.get("to"),
                            request.query_params.get("tags", ""))  # fmt: skip

    def post(self, request: Request) -> Response:
        body = request.data if isinstance(request.data, dict) else {}
        window = body.get("range") or {}
        query = (body.get("annotation") or {}).get("query", "")
        return self._answer(window.get("from"), window.get("to"), query if isinstance(query, str) else "")

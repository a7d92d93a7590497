"""The OpenAPI schema documents the error shape of every operation, not only its success."""

from __future__ import annotations

from drf_spectacular.openapi import AutoSchema
from rest_framework import serializers

ERROR_CODES = ("400", "401", "403", "404", "409")
# gunicorn refuses a request line longer than its limit_request_line (4094 bytes) itself, as an
# HTML page, before Django or the API see it: a client sending many or long query values meets it.
URI_TOO_LONG = {
    "description": "The URL is longer than the server reads (4094 bytes with the query); refused by the "
    "web server before the API, so the body is its HTML page, not the error shape.",
    "content": {"text/html": {"schema": {"type": "string"}}},
}


class ErrorDetail(serializers.Serializer):
    status = serializers.IntegerField(help_text="The HTTP status.")
    message = serializers.CharField(help_text="What went wrong, for a person.")
    fields = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        help_text="Field name -> messages (non_field_errors for the object as a whole).",
    )


class Error(serializers.Serializer):
    error = ErrorDetail()


class StorageOpsAutoSchema(AutoSchema):
    def _get_response_bodies(self, direction: str = "response"):
        responses = super()._get_response_bodies(direction)
        for code in ERROR_CODES:
            responses.setdefault(code, self._get_response_for_code(Error, code, direction=direction))
        responses.setdefault("414", URI_TOO_LONG)
        return responses

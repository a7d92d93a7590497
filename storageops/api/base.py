"""The pieces every API endpoint shares: serializer base, viewset base, one error shape."""

from __future__ import annotations

import copy
import logging

from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DataError
from django.db.models import ProtectedError
from rest_framework import serializers, status, viewsets
from rest_framework.response import Response
from rest_framework.views import exception_handler

from storageops.api.auth import RolePermission
from storageops.api.errors import RETRY_AFTER_SECONDS
from storageops.outage import is_outage

logger = logging.getLogger(__name__)


class FieldsBuiltOnce:
    """A ModelSerializer whose fields are derived from the model once per class and process.

    DRF derives a ModelSerializer's fields from the model's metadata and Meta for every
    instance, so every API request (a list has one serializer) paid for it again: 1-2 ms of
    a 6-10 ms list request (benchmarks/request_profile.py). What it derives depends only on
    the class; each instance gets its own copies, as DRF copies a class's declared fields.
    """

    _built_fields: dict[type, dict] = {}

    def get_fields(self):
        built = FieldsBuiltOnce._built_fields.get(type(self))
        if built is None:
            built = FieldsBuiltOnce._built_fields[type(self)] = super().get_fields()
        return copy.deepcopy(built)


class BaseModelSerializer(FieldsBuiltOnce, serializers.ModelSerializer):
    """id, url, display, the fields, created/last_updated; model validation as field errors."""

    url = serializers.SerializerMethodField(help_text="This object's API URL.")
    display = serializers.SerializerMethodField(help_text="A human-readable name.")

    def get_url(self, obj) -> str:
        request = self.context.get("request")
        path = f"/api/v1/{self.Meta.route}/{obj.pk}/"
        return request.build_absolute_uri(path) if request else path

    def get_display(self, obj) -> str:
        return str(obj)

    def validate(self, attrs: dict) -> dict:
        # Run the model's own validation (clean() and field validators) so the API, the
        # admin and the forms refuse the same values with the same messages.
        model = self.Meta.model
        m2m = {f.name for f in model._meta.many_to_many}
        # A copy: a refused update must leave the object as it was.
        instance = model.objects.get(pk=self.instance.pk) if self.instance else model()
        not_null = {}
        for key, value in attrs.items():
            if key in m2m:
                continue
            field = model._meta.get_field(key) if key in self._model_field_names() else None
            # full_clean() skips empty values of blank=True fields, so a JSON null sent for a
            # NOT NULL column (file_mix: null) would pass and fail in the database as a 500.
            if value is None and field is not None and not field.null:
                not_null[self._api_name(key)] = ["This field may not be null."]
            setattr(instance, key, value)
        if not_null:
            raise serializers.ValidationError(not_null)
        try:
            instance.full_clean()
        except DjangoValidationError as exc:
            raise serializers.ValidationError({self._api_name(k): v for k, v in exc.message_dict.items()}) from None
        if errors := self.relation_errors(instance, attrs):
            raise serializers.ValidationError({self._api_name(k): [v] for k, v in errors.items()})
        return attrs

    def relation_errors(self, instance, attrs: dict) -> dict[str, str]:
        """Hook: field errors of the valid `instance` (the object as this request would leave it)
        against the many-to-many relations it is about to have, which are set only after it is
        saved; `attrs` holds the ones the request gives."""
        return {}

    def _model_field_names(self) -> set[str]:
        return {f.name for f in self.Meta.model._meta.get_fields() if getattr(f, "concrete", False)}

    def _api_name(self, model_field: str) -> str:
        """The API's name of a model field (url_prefix for Endpoint.url)."""
        names = {field.source: name for name, field in self.fields.items()}
        return names.get(model_field, model_field)


class BaseViewSet(viewsets.ModelViewSet):
    permission_classes = [RolePermission]


def _flatten(data, prefix: str = "") -> dict[str, list[str]]:
    """Field errors as {"name": [messages]}; nested serializers and list items get dotted
    names (file_mix.0.size), so no message is ever a Python repr of a dict."""
    if isinstance(data, dict):
        out: dict[str, list[str]] = {}
        for key, value in data.items():
            out.update(_flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(data, list) and any(isinstance(item, (dict, list)) for item in data):
        out = {}
        for index, item in enumerate(data):
            if item:
                out.update(_flatten(item, f"{prefix}.{index}" if prefix else str(index)))
        return out
    messages = data if isinstance(data, list) else [data]
    return {prefix or "non_field_errors": [str(m) for m in messages]}


def _error(status_code: int, message: str, fields: dict | None = None, headers: dict | None = None) -> Response:
    body = {"error": {"status": status_code, "message": message, "fields": fields or {}}}
    return Response(body, status=status_code, headers=headers)


def error_handler(exc, context):
    """Every error in one shape: {"error": {"status", "message", "fields"}}.

    Field errors only ever go under "fields" and the message is never read out of them, so a
    model field named "detail" or "message" cannot take the place of either."""
    if isinstance(exc, DjangoValidationError):
        exc = serializers.ValidationError(getattr(exc, "message_dict", {"non_field_errors": exc.messages}))
    if isinstance(exc, ProtectedError):
        return _error(status.HTTP_409_CONFLICT, "Still in use by other objects; remove those first.")
    if what := is_outage(exc):
        logger.warning("API: the %s does not answer (%s)", what, exc)
        return _error(
            503, f"The {what} does not answer; try again in a minute.",
            headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
        )  # fmt: skip
    if isinstance(exc, RequestDataTooBig):
        return _error(413, "The request body is larger than the server accepts.")
    if isinstance(exc, (RecursionError, SuspiciousOperation)):
        # A value nested past Python's recursion limit (a JSON field sent as form text), or a
        # request Django finds suspicious (too many fields): the client's doing, not a 500.
        return _error(400, "The request could not be read: too deeply nested or too many fields.")
    if isinstance(exc, DataError):
        # The database refused a value the validation let through (a number out of its range):
        # a client's mistake still, but also a missing bound worth fixing, hence the log.
        logger.warning("API: the database refused a value: %s", exc)
        return _error(400, "A value is outside what the database can store.")
    response = exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, serializers.ValidationError):
        fields = _flatten(exc.detail)
        message = "Some fields are not valid."
    else:
        # Not a validation error: DRF's body is {"detail": message} (or a list of messages).
        data = response.data
        fields = {}
        message = str(data["detail"]) if isinstance(data, dict) and set(data) == {"detail"} else ""
        if not message and isinstance(data, (dict, list)):
            fields = _flatten(data)
    response.data = {"error": {"status": response.status_code, "message": message or response.status_text,
                               "fields": fields}}  # fmt: skip
    return response

"""The pieces every API endpoint shares: serializer base, viewset base, one error shape."""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import ProtectedError
from rest_framework import serializers, status, viewsets
from rest_framework.response import Response
from rest_framework.views import exception_handler

from storageops.api.auth import RolePermission


class BaseModelSerializer(serializers.ModelSerializer):
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
        return attrs

    def _model_field_names(self) -> set[str]:
        return {f.name for f in self.Meta.model._meta.get_fields() if getattr(f, "concrete", False)}

    def _api_name(self, model_field: str) -> str:
        """The API's name of a model field (url_prefix for Endpoint.url)."""
        names = {field.source: name for name, field in self.fields.items()}
        return names.get(model_field, model_field)


class BaseViewSet(viewsets.ModelViewSet):
    permission_classes = [RolePermission]


def error_handler(exc, context):
    """Every error in one shape: {"error": {"status", "message", "fields"}}."""
    if isinstance(exc, DjangoValidationError):
        exc = serializers.ValidationError(getattr(exc, "message_dict", {"non_field_errors": exc.messages}))
    if isinstance(exc, ProtectedError):
        return Response(
            {"error": {"status": 409, "message": "Still in use by other objects; remove those first.", "fields": {}}},
            status=status.HTTP_409_CONFLICT,
        )
    response = exception_handler(exc, context)
    if response is None:
        return None
    data = response.data
    fields: dict = {}
    message = ""
    if isinstance(data, dict):
        message = str(data.pop("detail", "")) if "detail" in data else ""
        fields = {k: [str(m) for m in (v if isinstance(v, list) else [v])] for k, v in data.items()}
    elif isinstance(data, list):
        fields = {"non_field_errors": [str(m) for m in data]}
    if not message:
        message = "Some fields are not valid." if fields else response.status_text
    response.data = {"error": {"status": response.status_code, "message": message, "fields": fields}}
    return response

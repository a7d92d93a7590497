"""The FTS app's part of the REST API: its instances under /api/v1/fts-instances/ (registered
in FtsConfig.ready()). Secrets go in, never out."""

from __future__ import annotations

from rest_framework import serializers

from campaigns.runs.engines.fts.models import FtsInstance
from storageops.api.base import BaseModelSerializer, BaseViewSet
from storageops.validators import validate_http_url


class FtsInstanceSerializer(BaseModelSerializer):
    # Secrets go in, never out.
    bearer_token = serializers.CharField(
        write_only=True, required=False, allow_blank=True, style={"input_type": "password"}
    )
    has_token = serializers.SerializerMethodField()
    auth_kind = serializers.CharField(read_only=True)

    def get_has_token(self, obj) -> bool:
        return bool(obj.bearer_token)

    class Meta:
        model = FtsInstance
        route = "fts-instances"
        fields = [
            "id",
            "url",
            "display",
            "name",
            "rest_url",
            "x509_cert",
            "x509_key",
            "bearer_token",
            "has_token",
            "auth_kind",
            "ca_path",
            "verify_tls",
            "files_per_job",
            "manage_link_limits",
            "poll_seconds",
            "notes",
            "created",
            "last_updated",
        ]

    rest_url = serializers.CharField(
        source="url",
        validators=[validate_http_url],
        help_text="The FTS3 REST server, e.g. https://fts3.example.org:8446",
    )


class FtsInstanceViewSet(BaseViewSet):
    queryset = FtsInstance.objects.all()
    serializer_class = FtsInstanceSerializer
    filterset_fields = ["name"]

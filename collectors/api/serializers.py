from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from collectors import hosttest_series, references
from collectors.choices import EventSource
from collectors.models import Event, Host, HostTestResult, HostTestSeries, MetricSample
from storageops.api.base import BaseModelSerializer, FieldsBuiltOnce


class HostSerializer(BaseModelSerializer):
    class Meta:
        model = Host
        route = "hosts"
        fields = [
            "id",
            "url",
            "display",
            "name",
            "address",
            "role",
            "client_weight",
            "node_exporter_url",
            "link_speed_bps",
            "sample_interval",
            "watched_files",
            "watched_services",
            "watched_filesystems",
            "log_files",
            "collector_version",
            "last_seen",
            "notes",
            "created",
            "last_updated",
        ]
        read_only_fields = ["collector_version", "last_seen", "created", "last_updated"]


REFERENCE_IDS = {f"{kind}_id" for kind in references.KINDS}


def _reference(kind: str) -> serializers.IntegerField:
    return serializers.IntegerField(
        source=f"{kind}_id", required=False, allow_null=True, help_text=f"The id of the {kind} the event is about."
    )


class EventSerializer(BaseModelSerializer):
    # By id (collectors.references): the objects belong to the app above collectors.
    backend = _reference("backend")
    endpoint = _reference("endpoint")
    run = _reference("run")

    class Meta:
        model = Event
        route = "events"
        fields = [
            "id",
            "url",
            "display",
            "time",
            "kind",
            "source",
            "host",
            "backend",
            "endpoint",
            "run",
            "who",
            "summary",
            "detail",
            "created",
        ]
        read_only_fields = ["source", "who", "created"]

    def _existing(self, kind: str, pk: int | None) -> int | None:
        if pk is not None and isinstance(references.resolve(kind, [pk])[pk], references.Deleted):
            raise serializers.ValidationError(f'Invalid pk "{pk}" - object does not exist.')
        return pk

    def validate_backend(self, pk: int | None) -> int | None:
        return self._existing("backend", pk)

    def validate_endpoint(self, pk: int | None) -> int | None:
        return self._existing("endpoint", pk)

    def validate_run(self, pk: int | None) -> int | None:
        return self._existing("run", pk)

    def create(self, validated_data):
        from collectors.events import log_event

        request = self.context["request"]
        data = {key.removesuffix("_id") if key in REFERENCE_IDS else key: v for key, v in validated_data.items()}
        return log_event(data.pop("kind"), data.pop("summary"), source=EventSource.API, user=request.user, **data)


class MetricSampleSerializer(FieldsBuiltOnce, serializers.ModelSerializer):
    class Meta:
        model = MetricSample
        fields = ["host", "metric", "label", "time", "value"]


class HostTestResultSerializer(FieldsBuiltOnce, serializers.ModelSerializer):
    class Meta:
        model = HostTestResult
        fields = ["index", "time", "seconds", "write_bps", "read_bps", "direct_read_bps", "iops", "lat_p50_ms",
                  "lat_p99_ms", "resident_fraction", "cached", "cached_reason", "faster_than_direct",
                  "faster_reason"]  # fmt: skip
        read_only_fields = fields


class HostTestSeriesSerializer(FieldsBuiltOnce, serializers.ModelSerializer):
    """A series as stored; its results in order on its own page (?results=0 leaves them out), never in lists."""

    host = serializers.SlugRelatedField(slug_field="name", read_only=True)
    params = serializers.SerializerMethodField(
        help_text="Every parameter the series runs with, defaults included (cold, reference, rolling...), "
        "sizes in bytes; requested_params is the request as it was made."
    )
    requested_params = serializers.JSONField(source="params", read_only=True)
    results = serializers.SerializerMethodField()

    def get_params(self, obj) -> dict:
        return hosttest_series.all_params(obj)

    @extend_schema_field(HostTestResultSerializer(many=True))
    def get_results(self, obj) -> list[dict]:
        request = self.context.get("request")
        if self.context.get("results") is False or (request is not None and request.query_params.get("results") == "0"):
            return []  # lists leave them out: a series may hold 50,000
        return HostTestResultSerializer(obj.results.order_by("index"), many=True).data

    class Meta:
        model = HostTestSeries
        fields = ["id", "host", "tool", "params", "requested_params", "repeats", "byte_budget", "bytes_written",
                  "state", "cancel_requested", "error", "created", "started_at", "finished_at", "results"]  # fmt: skip
        read_only_fields = fields


class HostTestRequestSerializer(serializers.Serializer):
    """What starts a series: the tool's parameters and the series' own (collectors.hosttest_series)."""

    params = serializers.JSONField(
        help_text='e.g. {"tool": "dd", "name": "rbd", "size": "1G", "block_size": "10M", "repeats": 50000, '
        '"byte_budget": "50T", "cold": true, "reference": true, "rolling": 50}'
    )

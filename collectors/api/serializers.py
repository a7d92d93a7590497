from __future__ import annotations

from rest_framework import serializers

from collectors.choices import EventSource
from collectors.models import Event, Host, MetricSample
from storageops.api.base import BaseModelSerializer


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
            "node_exporter_url",
            "link_speed_bps",
            "sample_interval",
            "watched_files",
            "watched_services",
            "log_files",
            "collector_version",
            "last_seen",
            "notes",
            "created",
            "last_updated",
        ]
        read_only_fields = ["collector_version", "last_seen", "created", "last_updated"]


class EventSerializer(BaseModelSerializer):
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

    def create(self, validated_data):
        from collectors.events import log_event

        request = self.context["request"]
        data = dict(validated_data)
        return log_event(data.pop("kind"), data.pop("summary"), source=EventSource.API, user=request.user, **data)


class MetricSampleSerializer(serializers.ModelSerializer):
    class Meta:
        model = MetricSample
        fields = ["host", "metric", "label", "time", "value"]

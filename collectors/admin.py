from django.contrib import admin

from collectors.models import Event, Host, MetricSample


@admin.register(Host)
class HostAdmin(admin.ModelAdmin):
    list_display = ["name", "role", "address", "last_seen", "collector_version"]
    list_filter = ["role"]
    search_fields = ["name", "address"]


@admin.register(MetricSample)
class MetricSampleAdmin(admin.ModelAdmin):
    list_display = ["host", "metric", "label", "time", "value"]
    list_filter = ["metric"]
    raw_id_fields = ["host"]
    show_full_result_count = False


@admin.register(Event)
class EventAdmin(admin.ModelAdmin):
    # Backends, endpoints and runs are campaigns' objects, named here by id (collectors.references).
    list_display = ["time", "kind", "source", "host", "backend_id", "endpoint_id", "run_id", "who", "summary"]
    list_filter = ["kind", "source"]
    search_fields = ["summary", "detail", "who"]
    raw_id_fields = ["user"]

from django.apps import AppConfig
from django.db.models.signals import post_save


class CollectorsConfig(AppConfig):
    name = "collectors"
    verbose_name = "Hosts and events"

    def ready(self) -> None:
        from collectors import grafana
        from collectors.metrics import HostsCollector
        from collectors.models import Event, Host
        from storageops import changelog, metrics, schedules
        from storageops.api import routes

        schedules.register("StorageOps: scrape hosts' node_exporter", "collectors.node_exporter.scrape", 15)
        post_save.connect(grafana.on_event_saved, sender=Event, dispatch_uid="collectors-grafana-push")
        # storageops imports no app: collectors fills its registries.
        changelog.register(Host)
        metrics.register("collectors", HostsCollector())
        for prefix, name in (
            ("hosts", "HostViewSet"), ("host-tests", "HostTestSeriesViewSet"), ("events", "EventViewSet"),
            ("samples", "MetricSampleViewSet"),
        ):  # fmt: skip
            routes.register_viewset(prefix, f"collectors.api.views.{name}")

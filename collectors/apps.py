from django.apps import AppConfig
from django.db.models.signals import post_save


class CollectorsConfig(AppConfig):
    name = "collectors"
    verbose_name = "Hosts and events"

    def ready(self) -> None:
        from collectors import grafana
        from collectors.models import Event

        post_save.connect(grafana.on_event_saved, sender=Event, dispatch_uid="collectors-grafana-push")

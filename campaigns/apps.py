from django.apps import AppConfig
from django.db.models.signals import post_save


def _event_saved(sender, instance, created, raw=False, **kwargs) -> None:
    if created and not raw:
        from campaigns.disturbance import on_event

        on_event(instance)


class CampaignsConfig(AppConfig):
    name = "campaigns"
    verbose_name = "Campaigns"

    def ready(self) -> None:
        # However an event enters the log (collector, admin, API), the runs it disturbs know.
        post_save.connect(_event_saved, sender="collectors.Event", dispatch_uid="campaigns-event-disturbs")

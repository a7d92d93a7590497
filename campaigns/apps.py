from django.apps import AppConfig
from django.db.models.signals import post_delete, post_save


def _event_saved(sender, instance, created, raw=False, **kwargs) -> None:
    if created and not raw:
        from campaigns.results.disturbance import on_event

        on_event(instance)


def _schedule_deleted(sender, instance, **kwargs) -> None:
    from campaigns.runs.scheduling import forget_periodic_task

    forget_periodic_task(instance)


class CampaignsConfig(AppConfig):
    name = "campaigns"
    verbose_name = "Campaigns"

    def ready(self) -> None:
        # However an event enters the log (collector, admin, API), the runs it disturbs know.
        post_save.connect(_event_saved, sender="collectors.Event", dispatch_uid="campaigns-event-disturbs")
        # However a schedule goes (its page, the API, its campaign deleted), beat's task goes too.
        post_delete.connect(
            _schedule_deleted, sender="campaigns.CampaignSchedule", dispatch_uid="campaigns-schedule-task"
        )

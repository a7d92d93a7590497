from importlib import import_module

from django.apps import AppConfig
from django.db.models.signals import post_delete, post_save

# The engines of this deployment, in the order the forms offer them (gfal2, the default, first).
# A new engine is a package of campaigns/runs/engines/ and a line here (docs/architecture.md).
ENGINE_MODULES = ("campaigns.runs.engines.gfal2.engine", "campaigns.runs.engines.fts.engine")


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
        # Each engine registers itself in campaigns.models.engine_registry when its module is
        # imported, as NetBox's plugins do when their app is ready.
        for module in ENGINE_MODULES:
            import_module(module)

        # However an event enters the log (collector, admin, API), the runs it disturbs know.
        post_save.connect(_event_saved, sender="collectors.Event", dispatch_uid="campaigns-event-disturbs")
        # However a schedule goes (its page, the API, its campaign deleted), beat's task goes too.
        post_delete.connect(
            _schedule_deleted, sender="campaigns.CampaignSchedule", dispatch_uid="campaigns-schedule-task"
        )

from django.apps import AppConfig


class FtsConfig(AppConfig):
    """The FTS engine as a Django app: its models, admin, API and drive task live in its package.

    When it is ready it registers the engine, and tells the lower floors and the core's registries
    of its models and of what it adds to a verdict, as campaigns does of its own.
    """

    name = "campaigns.runs.engines.fts"
    label = "fts"
    verbose_name = "FTS"

    def ready(self) -> None:
        from campaigns.models import transfer_extras
        from campaigns.results import engine_notes
        from campaigns.runs.engines.fts import engine, link_limit, scheduling_gap  # noqa: F401  (engine registers itself)
        from campaigns.runs.engines.fts.models import TRANSFER_COLUMNS, FtsInstance
        from storageops import changelog
        from storageops.api import routes

        changelog.register(FtsInstance)
        routes.register_viewset("fts-instances", "campaigns.runs.engines.fts.api.FtsInstanceViewSet")
        transfer_extras.register(*TRANSFER_COLUMNS)
        # Said in this order, and a run list marks the first that applies.
        engine_notes.register(
            engine_notes.EngineNote("link_limit", "link_limit", "Link limit", "link limit not in force",
                                    link_limit.not_in_force, link_limit.sentence),
            engine_notes.EngineNote("scheduling_gap", "scheduling", "Scheduling", "scheduling gap",
                                    scheduling_gap.find, scheduling_gap.sentence),
        )  # fmt: skip

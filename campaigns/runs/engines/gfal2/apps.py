from django.apps import AppConfig


class Gfal2Config(AppConfig):
    """The gfal2 engine as a Django app: when it is ready, it registers the engine and the
    storage library every stat, listing, write, delete and checksum around a run goes through
    (campaigns.runs.storage), so gfal2 is imported by this package only."""

    name = "campaigns.runs.engines.gfal2"
    label = "gfal2"
    verbose_name = "gfal2"

    def ready(self) -> None:
        from campaigns.runs.engines.gfal2 import engine, storage  # noqa: F401  (they register themselves)

from django.apps import AppConfig


class XrootdConfig(AppConfig):
    """The xrootd engine as a Django app: when it is ready, it registers the engine."""

    name = "campaigns.runs.engines.xrootd"
    label = "xrootd"
    verbose_name = "XRootD client"

    def ready(self) -> None:
        from campaigns.runs.engines.xrootd import engine  # noqa: F401  (it registers itself)

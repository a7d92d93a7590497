from django.apps import AppConfig


class DevsiteConfig(AppConfig):
    """What only development, the tests and the demo need: XRootD test servers, process
    supervision and `manage.py runsite`. A production deployment leaves it out
    (STORAGEOPS_DEVSITE=false) and loses nothing it runs."""

    name = "devsite"
    verbose_name = "Development site"

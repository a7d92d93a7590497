from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _after_migrate(**kwargs) -> None:
    from django.apps import apps

    from storageops.roles import sync_groups
    from storageops.schedules import ensure_builtin_schedules

    # Also runs after a test database flush, which would otherwise leave no roles behind.
    sync_groups(apps)
    ensure_builtin_schedules()


class StorageOpsConfig(AppConfig):
    name = "storageops"
    verbose_name = "StorageOps"

    def ready(self) -> None:
        from campaigns.models import Backend, Campaign, Endpoint, FtsInstance
        from collectors.models import Host
        from storageops import changelog

        post_migrate.connect(_after_migrate, sender=self, dispatch_uid="storageops-after-migrate")
        changelog.register(Backend, Endpoint, Host, Campaign, FtsInstance)

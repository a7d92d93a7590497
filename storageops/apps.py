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
        # The apps register their models for the change log, their /metrics figures, their API
        # viewsets and their retention in their own ready(): storageops imports no app.
        post_migrate.connect(_after_migrate, sender=self, dispatch_uid="storageops-after-migrate")
        from storageops import grants, schedules

        grants.connect_signals()
        schedules.register("StorageOps: retention of old transfers and samples", "storageops.retention", 3600)

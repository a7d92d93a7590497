from django.apps import AppConfig


class StorageOpsConfig(AppConfig):
    name = "storageops"
    verbose_name = "StorageOps"

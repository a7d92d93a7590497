from django.contrib import admin

from storageops.models import ChangeRecord


@admin.register(ChangeRecord)
class ChangeRecordAdmin(admin.ModelAdmin):
    """Read-only: the change log is history, not something to edit."""

    list_display = ["time", "user_name", "via", "action", "object_type", "object_repr"]
    list_filter = ["action", "via", "object_type"]
    search_fields = ["object_repr", "user_name", "request_id"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

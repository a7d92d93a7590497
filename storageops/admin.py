from django.contrib import admin

from storageops.changelog import describe_changes
from storageops.models import ChangeRecord


@admin.register(ChangeRecord)
class ChangeRecordAdmin(admin.ModelAdmin):
    """Read-only: the change log is history, not something to edit."""

    # What changed next to whose: the summary is the widest column, and must not scroll out of sight.
    list_display = ["time", "by", "object_repr", "summary", "action", "via", "object_type"]
    list_filter = ["action", "via", "object_type"]
    search_fields = ["object_repr", "user_name", "request_id"]

    @admin.display(description="By", ordering="user_name")
    def by(self, record: ChangeRecord) -> str:
        return record.user_name or record.via

    @admin.display(description="Changes")
    def summary(self, record: ChangeRecord) -> str:
        # A creation's or deletion's "changes" are every field: its page has them.
        return describe_changes(record.changes) if record.action == "update" else "—"

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

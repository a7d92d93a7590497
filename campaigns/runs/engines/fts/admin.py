"""The FTS app's admin: its instances (the bearer token write-only, as every secret's form),
and the link limits runs changed on them (read-only: a run's record)."""

from django import forms
from django.contrib import admin

from campaigns.admin import WriteOnlySecretForm, write_only
from campaigns.models import Campaign
from campaigns.runs.engines.fts.models import FtsInstance, FtsLinkLimit, FtsTransfer


class FtsInstanceForm(WriteOnlySecretForm):
    secret_field = "bearer_token"  # noqa: S105 - a field name
    bearer_token = write_only("OIDC access token")
    clear_bearer_token = forms.BooleanField(required=False, help_text="Remove the stored token.")

    class Meta:
        model = FtsInstance
        fields = [
            "name",
            "url",
            "x509_cert",
            "x509_key",
            "bearer_token",
            "ca_path",
            "verify_tls",
            "files_per_job",
            "manage_link_limits",
            "poll_seconds",
            "notes",
        ]


@admin.register(FtsInstance)
class FtsInstanceAdmin(admin.ModelAdmin):
    form = FtsInstanceForm
    list_display = ["name", "url", "auth_kind", "verify_tls", "files_per_job", "manage_link_limits"]
    search_fields = ["name", "url"]

    def get_deleted_objects(self, objs, request):
        # Campaigns name their instance inside engine_options (no foreign key the admin's collector
        # follows), so the admin is told of them here: it then shows its "protected" page instead
        # of deleting, as it did while the reference was a PROTECT foreign key.
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        using = Campaign.objects.filter(engine_options__instance__in=[obj.pk for obj in objs]).order_by("name")
        return deleted, counts, perms_needed, [*protected, *(f"Campaign: {campaign}" for campaign in using)]


@admin.register(FtsLinkLimit)
class FtsLinkLimitAdmin(admin.ModelAdmin):
    list_display = ["run", "symbolicname", "source_se", "dest_se", "changed_at", "restored_at", "restore_error"]
    readonly_fields = [f.name for f in FtsLinkLimit._meta.fields]


@admin.register(FtsTransfer)
class FtsTransferAdmin(admin.ModelAdmin):
    # What FTS said of a transfer: a record, read-only as the transfer's run is.
    list_display = ["transfer", "job_id", "file_id"]
    search_fields = ["job_id"]
    raw_id_fields = ["transfer"]
    readonly_fields = ["transfer", "job_id", "file_id"]
    show_full_result_count = False

from django import forms
from django.contrib import admin

from campaigns.models import (
    Backend,
    Campaign,
    CampaignSchedule,
    Endpoint,
    FtsInstance,
    FtsLinkLimit,
    Run,
    RunStep,
    Transfer,
)
from campaigns.runs import scheduling


@admin.register(Backend)
class BackendAdmin(admin.ModelAdmin):
    list_display = ["name", "access_layer", "access_version", "unified_layer", "storage_layer", "last_updated"]
    search_fields = ["name", "notes"]
    list_filter = ["access_layer"]


@admin.register(Endpoint)
class EndpointAdmin(admin.ModelAdmin):
    list_display = ["name", "backend", "url"]
    list_filter = ["backend"]
    search_fields = ["name", "url"]
    filter_horizontal = ["hosts"]
    # The token is a secret: never echo it back into the form.
    exclude = ["bearer_token"]


@admin.register(Campaign)
class CampaignAdmin(admin.ModelAdmin):
    list_display = ["name", "kind", "engine", "file_count", "file_size", "concurrency_steps", "last_updated"]
    list_filter = ["kind", "engine"]
    search_fields = ["name", "description"]
    filter_horizontal = ["sources", "destinations"]


class RunStepInline(admin.TabularInline):
    model = RunStep
    extra = 0
    can_delete = False
    readonly_fields = ["index", "concurrency", "started_at", "ended_at"]


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ["id", "campaign", "state", "trigger", "started_at", "finished_at", "files_done", "files_failed"]
    list_filter = ["state", "trigger", "campaign"]
    readonly_fields = [f.name for f in Run._meta.fields]
    inlines = [RunStepInline]


@admin.register(Transfer)
class TransferAdmin(admin.ModelAdmin):
    list_display = ["run", "index", "step", "state", "size", "duration", "throughput_bps", "error_category"]
    list_filter = ["state", "error_category"]
    raw_id_fields = ["run", "source_endpoint", "destination_endpoint"]
    show_full_result_count = False


@admin.register(CampaignSchedule)
class CampaignScheduleAdmin(admin.ModelAdmin):
    list_display = ["campaign", "describe", "enabled", "window_days", "runs_started", "max_runs", "last_decision"]
    list_filter = ["enabled", "kind"]
    readonly_fields = ["runs_started", "last_due_at", "last_decision", "periodic_task"]

    # Through the service, so beat's task follows an edit made here too.
    def save_model(self, request, obj, form, change) -> None:
        scheduling.save_schedule(obj)

    def delete_model(self, request, obj) -> None:
        scheduling.delete_schedule(obj)

    def delete_queryset(self, request, queryset) -> None:
        for obj in queryset:
            scheduling.delete_schedule(obj)


class FtsInstanceForm(forms.ModelForm):
    # Write-only: the token is never rendered back; leaving the field empty keeps it.
    bearer_token = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="OIDC access token (write-only: leave empty to keep the stored one).",
    )
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

    def clean_bearer_token(self) -> str:
        value = self.cleaned_data.get("bearer_token") or ""
        if not value and self.instance.pk and not self.data.get("clear_bearer_token"):
            return FtsInstance.objects.get(pk=self.instance.pk).bearer_token
        return value


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

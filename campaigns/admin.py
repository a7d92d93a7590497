from django import forms
from django.contrib import admin

from campaigns.editing import CampaignRelationRules
from campaigns.models import (
    Backend,
    Campaign,
    CampaignSchedule,
    Endpoint,
    Run,
    RunStep,
    TokenIssuer,
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


class CampaignAdminForm(CampaignRelationRules, forms.ModelForm):
    """The admin's campaign form (its fields are the admin's) with the campaign's relation rules."""


@admin.register(Campaign)
class CampaignAdmin(admin.ModelAdmin):
    form = CampaignAdminForm
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


def write_only(help_text: str) -> forms.CharField:
    return forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text=f"{help_text} (write-only: leave empty to keep the stored one).",
    )


class WriteOnlySecretForm(forms.ModelForm):
    """A model form whose secret (`secret_field`, declared with write_only() beside a
    `clear_<secret_field>` box) is never rendered back and is kept when left empty."""

    secret_field = ""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # A new object needs a secret its model requires; a stored one is kept when left empty.
        blank = self._meta.model._meta.get_field(self.secret_field).blank
        self.fields[self.secret_field].required = self.instance.pk is None and not blank
        # Django asks for clean_<field>: the secret's is the same for every such form.
        setattr(self, f"clean_{self.secret_field}", self._secret_or_stored)

    def _secret_or_stored(self) -> str:
        name = self.secret_field
        value = self.cleaned_data.get(name) or ""
        if not value and self.instance.pk and not self.data.get(f"clear_{name}"):
            return getattr(type(self.instance).objects.get(pk=self.instance.pk), name)
        return value


class TokenIssuerForm(WriteOnlySecretForm):
    secret_field = "client_secret"  # noqa: S105 - a field name
    client_secret = write_only("The client's secret at the issuer")

    class Meta:
        model = TokenIssuer
        fields = ["name", "token_endpoint", "client_id", "client_secret", "audience", "base_path", "ca_file",
                  "timeout", "notes"]  # fmt: skip


@admin.register(TokenIssuer)
class TokenIssuerAdmin(admin.ModelAdmin):
    form = TokenIssuerForm
    list_display = ["name", "token_endpoint", "client_id", "audience", "base_path"]
    search_fields = ["name", "token_endpoint", "client_id"]

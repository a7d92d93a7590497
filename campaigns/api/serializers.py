from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import serializers

from campaigns import runs
from campaigns.api.engine_options import EngineOptionsField, refuse_retired_option_fields
from campaigns.api.transfer_extras import WithTransferExtras
from campaigns.choices import BaselineChoice
from campaigns.models import (
    SCHEDULE_SETTINGS,
    Backend,
    Campaign,
    CampaignSchedule,
    Endpoint,
    ReadinessCheck,
    Run,
    TokenIssuer,
    Transfer,
    campaign_rules,
)
from campaigns.results import baseline_choice, readers
from collectors.models import Host
from storageops import paths
from storageops.api.base import BaseModelSerializer, FieldsBuiltOnce


class BackendSerializer(BaseModelSerializer):
    class Meta:
        model = Backend
        route = "backends"
        fields = [
            "id",
            "url",
            "display",
            "name",
            "access_layer",
            "access_version",
            "unified_layer",
            "unified_version",
            "storage_layer",
            "storage_version",
            "notes",
            "created",
            "last_updated",
        ]


class EndpointSerializer(BaseModelSerializer):
    # Secrets go in, never out.
    bearer_token = serializers.CharField(
        write_only=True, required=False, allow_blank=True, style={"input_type": "password"}
    )
    has_token = serializers.SerializerMethodField()

    def get_has_token(self, obj) -> bool:
        return bool(obj.bearer_token)

    class Meta:
        model = Endpoint
        route = "endpoints"
        fields = [
            "id",
            "url",
            "display",
            "name",
            "backend",
            "url_prefix",
            "protocol",
            "hosts",
            "bearer_token",
            "has_token",
            "token_issuer",
            "x509_proxy",
            "ca_dir",
            "notes",
            "timeout",
            "created",
            "last_updated",
        ]
        extra_kwargs = {"hosts": {"required": False}}

    url_prefix = serializers.CharField(source="url", help_text="The storage URL prefix, e.g. root://door1:1094//data/.")
    protocol = serializers.CharField(read_only=True)


class TokenIssuerSerializer(BaseModelSerializer):
    # The secret goes in, never out; leaving it out of an update keeps the stored one.
    client_secret = serializers.CharField(write_only=True, max_length=500, style={"input_type": "password"})
    has_secret = serializers.SerializerMethodField()

    def get_has_secret(self, obj) -> bool:
        return bool(obj.client_secret)

    class Meta:
        model = TokenIssuer
        route = "token-issuers"
        fields = [
            "id",
            "url",
            "display",
            "name",
            "token_endpoint",
            "client_id",
            "client_secret",
            "has_secret",
            "audience",
            "base_path",
            "ca_file",
            "timeout",
            "notes",
            "created",
            "last_updated",
        ]

    def get_fields(self):
        fields = super().get_fields()
        if self.instance is not None and not isinstance(self.instance, list):
            fields["client_secret"].required = False
        return fields


class CampaignSerializer(BaseModelSerializer):
    # Every host is accepted here, so a door named by mistake is refused as "not a client"
    # (validate) rather than as a host that "does not exist".
    clients = serializers.PrimaryKeyRelatedField(
        queryset=Host.objects.all(), many=True, required=False,
        help_text="Client hosts (role client) that share each step's copies; empty: the driving worker copies.",
    )  # fmt: skip
    planned_files = serializers.IntegerField(read_only=True)
    planned_bytes = serializers.IntegerField(read_only=True)
    engine_options = EngineOptionsField(
        required=False,
        help_text="The engine's own options, a JSON object checked by the chosen engine's schema; each option "
        "below says its engine.",
    )

    def to_internal_value(self, data):
        refuse_retired_option_fields(data)
        return super().to_internal_value(data)

    def relation_errors(self, instance: Campaign, attrs: dict) -> dict[str, str]:
        """The campaign's rules against the endpoints and clients given, or kept where the request
        leaves them (campaign_rules: the form's and the admin's too)."""
        kept = campaign_rules.Relations.saved(self.instance) if self.instance else campaign_rules.Relations((), (), ())
        relations = campaign_rules.Relations(
            *(
                list(attrs[name]) if name in attrs else getattr(kept, name)
                for name in ("sources", "destinations", "clients")
            )
        )
        return campaign_rules.relation_errors(instance, relations)

    class Meta:
        model = Campaign
        route = "campaigns"
        fields = [
            "id",
            "url",
            "display",
            *(f.name for f in Campaign._meta.fields if f.name != "id"),
            "sources",
            "destinations",
            "clients",
            "planned_files",
            "planned_bytes",
        ]
        read_only_fields = ["created", "last_updated"]


class RunSerializer(BaseModelSerializer):
    campaign_name = serializers.CharField(source="campaign.name", read_only=True)
    started_by = serializers.SlugRelatedField(
        slug_field="username",
        read_only=True,
        allow_null=True,
        help_text="The user who started the run: signed in on the web, or the owner of the API token; "
        "null for a schedule or a command (started_by_name says which).",
    )
    progress_percent = serializers.FloatField(read_only=True)
    verdict = serializers.SerializerMethodField(
        help_text="Knee, bottleneck and capacity, stored when the run finished; "
        "GET runs/{id}/verdict/ recomputes it from the rows."
    )

    judgement = serializers.SerializerMethodField(
        help_text="The run against its campaign's history, stored when it ended: status (within, improved, "
        "regressed, recovered, no_baseline; better in judgements before improved), headline, each figure with its "
        "band (low, high, median, n, method), the suspects of a regression, ongoing {since, runs} of a regression "
        "that lasts, recovered {since, runs}, and normal_from (the run accepted as the new normal, if any)."
    )

    retries = serializers.PrimaryKeyRelatedField(
        many=True, read_only=True, help_text="Runs made by retry-failed of this run (at most one)."
    )
    retryable = serializers.SerializerMethodField(
        help_text="How many transfers POST runs/{id}/retry-failed/ would re-drive now (0: it would be refused)."
    )

    in_baseline = serializers.SerializerMethodField(
        help_text="Whether later runs of the campaign count this run in their baseline, and why (counted, why, "
        "choice). POST runs/{id}/baseline/ includes or leaves it out."
    )

    throughput_bps = serializers.SerializerMethodField(
        help_text="Bytes/s of the run: once it has finished, its final figure (summary.total.throughput_bps, "
        "bytes of successful copies over the active window); while it is live, live_rate_bps."
    )
    live_rate_bps = serializers.SerializerMethodField(
        help_text="Bytes/s over the last 10 s while the run is live; null once it has finished (the last live "
        "rate is not the run's figure: throughput_bps is)."
    )

    def get_throughput_bps(self, obj) -> float | None:
        if obj.is_live:
            return obj.throughput_bps
        # A list defers the summary and annotates the one key (campaigns.api.views).
        if hasattr(obj, "final_throughput_bps"):
            final = obj.final_throughput_bps
            return float(final) if final not in (None, "") else None
        return ((obj.summary or {}).get("total") or {}).get("throughput_bps")

    def get_live_rate_bps(self, obj) -> float | None:
        return obj.throughput_bps if obj.is_live else None

    def get_in_baseline(self, obj) -> dict:
        return baseline_choice.standing(obj)

    def get_verdict(self, obj) -> dict | None:
        # Stored only: computing a live run's verdict for every row of a list is too dear.
        return (readers.stored(obj) or {}).get("verdict")

    def get_judgement(self, obj) -> dict | None:
        return (readers.stored(obj) or {}).get("judgement")

    def get_retryable(self, obj) -> int:
        return runs.retryable_count(obj)

    class Meta:
        model = Run
        route = "runs"
        fields = [
            "id",
            "url",
            "display",
            "campaign",
            "campaign_name",
            "state",
            "trigger",
            "started_by",
            "started_by_name",
            "created",
            "started_at",
            "finished_at",
            "planned_files",
            "planned_bytes",
            "files_done",
            "files_failed",
            "files_skipped",
            "files_cancelled",
            "bytes_done",
            "progress_percent",
            "current_step",
            "current_concurrency",
            "active_transfers",
            "throughput_bps",
            "live_rate_bps",
            "eta_seconds",
            "stop_reason",
            "disturbed",
            "retry_of",
            "retries",
            "retryable",
            "snapshot",
            "versions",
            "summary",
            "verdict",
            "judgement",
            "baseline_choice",
            "baseline_reason",
            "baseline_chosen_by",
            "baseline_chosen_at",
            "in_baseline",
        ]
        read_only_fields = fields


class BaselineChoiceSerializer(serializers.Serializer):
    """POST runs/{id}/baseline/: include the run in its campaign's baselines, leave it out, or
    leave it to the rule (auto)."""

    choice = serializers.ChoiceField(choices=BaselineChoice.choices)
    reason = serializers.CharField(
        max_length=300, required=False, allow_blank=True, default="",
        help_text="Why; required to include or leave out.",
    )  # fmt: skip


# What a list leaves out of each run: a run's frozen snapshot and its results (steps, doors,
# verdict, judgement) are tens of kilobytes, and a page of 100 of them megabytes of JSON.
LIST_OMITS = ("snapshot", "versions", "summary", "verdict", "judgement", "in_baseline")


class RunListSerializer(RunSerializer):
    """A run as a list shows it: its state, counters and the headlines of its verdict and
    judgement (read from the database by the list's query); the rest at GET runs/{id}/."""

    verdict_status = serializers.CharField(read_only=True, allow_null=True)
    verdict_headline = serializers.CharField(read_only=True, allow_null=True)
    judgement_status = serializers.CharField(read_only=True, allow_null=True)
    judgement_headline = serializers.CharField(read_only=True, allow_null=True)

    class Meta(RunSerializer.Meta):
        fields = [
            *(f for f in RunSerializer.Meta.fields if f not in LIST_OMITS),
            "verdict_status",
            "verdict_headline",
            "judgement_status",
            "judgement_headline",
        ]
        read_only_fields = fields


def _endpoint_by_the_path_rule(endpoint: Endpoint) -> Endpoint:
    """An endpoint a check may write to: its URL passes the path rule now (its row may predate it)."""
    try:
        paths.check_endpoint_url(endpoint.url)
    except DjangoValidationError as exc:
        raise serializers.ValidationError(exc.messages) from None
    return endpoint


class ReadinessCheckSerializer(BaseModelSerializer):
    """A readiness check: POST {endpoint, peer} queues one; GET follows its steps."""

    endpoint_name = serializers.CharField(source="endpoint.name", read_only=True)
    peer_name = serializers.CharField(source="peer.name", read_only=True, default=None, allow_null=True)
    steps = serializers.JSONField(
        read_only=True,
        help_text="One entry a step, in the order run: key, title, operation, endpoint, state (pending, running, "
        "passed, failed, skipped, cancelled), message (the storage's own words), seconds, started (epoch, while "
        "running), deadline (seconds: the endpoint's timeout), credentials.",
    )

    def validate_endpoint(self, endpoint):
        return _endpoint_by_the_path_rule(endpoint)

    def validate_peer(self, peer):
        return peer and _endpoint_by_the_path_rule(peer)

    class Meta:
        model = ReadinessCheck
        route = "readiness-checks"
        fields = [
            "id",
            "url",
            "display",
            "endpoint",
            "endpoint_name",
            "peer",
            "peer_name",
            "state",
            "requested_by",
            "created",
            "started_at",
            "finished_at",
            "summary",
            "grid",
            "cancel_requested_at",
            "heartbeat_at",
            "steps",
        ]
        read_only_fields = [
            "state", "requested_by", "created", "started_at", "finished_at", "summary", "grid", "cancel_requested_at",
            "heartbeat_at",
        ]  # fmt: skip


class TransferSerializer(FieldsBuiltOnce, WithTransferExtras, serializers.ModelSerializer):
    # Beside Transfer's own fields, what the engines record of it in tables of their own
    # (campaigns.models.transfer_extras), under the names their engines register.
    class Meta:
        model = Transfer
        fields = [
            "id",
            "run",
            "index",
            "step",
            "source",
            "destination",
            "size",
            "state",
            "attempt",
            "started_at",
            "finished_at",
            "duration",
            "bytes_transferred",
            "throughput_bps",
            "error_category",
            "error_code",
            "error_message",
            "complete_on_destination",
            "copy_mode",
            "source_checksum",
            "destination_checksum",
            "transfer_host",
        ]
        read_only_fields = fields


class CampaignScheduleSerializer(BaseModelSerializer):
    describe = serializers.CharField(read_only=True)
    status = serializers.CharField(
        read_only=True, help_text="enabled, disabled, or finished: max runs reached / past its end date."
    )
    periodic_task = serializers.PrimaryKeyRelatedField(read_only=True, help_text="beat's task (kept in step).")

    class Meta:
        model = CampaignSchedule
        route = "schedules"
        fields = [
            "id",
            "url",
            "display",
            "campaign",
            *SCHEDULE_SETTINGS,
            "runs_started",
            "last_due_at",
            "last_decision",
            "status",
            "finished_at",
            "finished_reason",
            "describe",
            "periodic_task",
            "created",
            "last_updated",
        ]
        read_only_fields = ["runs_started", "last_due_at", "last_decision", "finished_at", "finished_reason",
                            "created", "last_updated"]  # fmt: skip

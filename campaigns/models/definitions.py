"""What is tested and how: backends, endpoints and campaigns."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.urls import reverse

from campaigns import choices
from campaigns.models import campaign_rules, engine_registry, sweep_rules
from campaigns.models.token_issuers import TOKEN_SCHEMES, TokenIssuer
from storageops.models import BaseModel
from storageops.sealed import SealedTextField
from storageops.validators import (
    MAX_INT32,
    validate_absolute_path,
    validate_endpoint_url,
    validate_relative_path,
    validate_source_url_list,
)

# On every database, not only where the backend's column range adds the bound (see MAX_INT32).
INT32 = MaxValueValidator(MAX_INT32)

name_validator = RegexValidator(
    r"^[A-Za-z0-9][A-Za-z0-9 ._\-]*$",
    "Use letters, digits, spaces, dots, dashes and underscores, starting with a letter or digit.",
)


class Backend(BaseModel):
    """One storage configuration under test, in the three layers of the BNL paper."""

    name = models.CharField(max_length=100, unique=True, validators=[name_validator])
    access_layer = models.CharField(
        max_length=20, choices=choices.AccessLayer.choices, help_text="The protocol/door software."
    )
    access_version = models.CharField(max_length=50, blank=True, help_text="e.g. 5.6.9")
    unified_layer = models.CharField(
        max_length=100, blank=True, help_text="Namespace/filesystem layer, e.g. Lustre, CephFS, dCache pools."
    )
    unified_version = models.CharField(max_length=50, blank=True)
    storage_layer = models.CharField(
        max_length=100, blank=True, help_text="Backend storage, e.g. ZFS 10x10, MD RAID 14x7, Ceph RBD."
    )
    storage_version = models.CharField(max_length=50, blank=True)
    notes = models.TextField(blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("campaigns:backend_detail", args=[self.pk])


class Endpoint(BaseModel):
    """A URL prefix through which a backend is reached, served by one or more doors."""

    name = models.CharField(max_length=100, unique=True, validators=[name_validator])
    backend = models.ForeignKey(Backend, on_delete=models.PROTECT, related_name="endpoints")
    url = models.CharField(
        "URL prefix",
        max_length=500,
        validators=[validate_endpoint_url],
        help_text="e.g. root://door1.example.org:1094//atlas/test/ or davs://door2:2880/pnfs/test/",
    )
    hosts = models.ManyToManyField(
        "collectors.Host", blank=True, related_name="endpoints", help_text="The doors serving this endpoint."
    )
    # Credentials are per endpoint; the token is write-only in forms and the API, never logged, and
    # sealed in the database (storageops.sealed).
    bearer_token = SealedTextField(blank=True, help_text="Bearer token sent to this endpoint (write-only).")
    # Without an issuer the static token above (if any) is sent as it is; with one, each run asks
    # it for tokens scoped to that run's paths (campaigns.runs.tokens).
    token_issuer = models.ForeignKey(
        TokenIssuer,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="endpoints",
        help_text="Tokens from this issuer, scoped per run to the paths the run reads and writes; "
        "empty: the static bearer token, if any.",
    )
    x509_proxy = models.CharField(max_length=500, blank=True, validators=[validate_absolute_path])
    ca_dir = models.CharField(
        "CA directory",
        max_length=500,
        blank=True,
        validators=[validate_absolute_path],
        help_text="Hashed CA directory (X509_CERT_DIR) for https/davs/roots endpoints.",
    )
    notes = models.TextField(blank=True)
    timeout = models.PositiveIntegerField(
        "timeout (s)",
        default=120,
        validators=[MinValueValidator(1), MaxValueValidator(86400)],
        help_text="The deadline of each readiness-check step against this endpoint: at it the step's gfal2 call "
        "is cancelled and the step fails.",
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("campaigns:endpoint_detail", args=[self.pk])

    @property
    def protocol(self) -> str:
        return urlsplit(self.url).scheme

    def clean(self) -> None:
        super().clean()
        if self.token_issuer_id is None:
            return
        if self.bearer_token:
            raise ValidationError({"token_issuer": "Use either a static bearer token or a token issuer, not both."})
        if self.protocol not in TOKEN_SCHEMES:
            why = f"Tokens from an issuer are sent to davs:// and https:// doors only, not {self.protocol}://."
            raise ValidationError({"token_issuer": why})
        try:
            self.token_issuer.scope_path(urlsplit(self.url).path or "/")
        except ValidationError as exc:
            raise ValidationError({"token_issuer": exc.messages}) from None

    @property
    def token_kind(self) -> str:
        """How this endpoint authenticates with a token: "issuer", "static" or ""."""
        return "issuer" if self.token_issuer_id else "static" if self.bearer_token else ""


def default_concurrency_steps() -> list[int]:
    return [1]


def validate_concurrency_steps(value: object) -> None:
    if not isinstance(value, list) or not value:
        raise ValidationError("Give at least one concurrency, e.g. [1, 2, 4, 8].")
    limit = settings.STORAGEOPS_MAX_CONCURRENCY
    for item in value:
        if not isinstance(item, int) or isinstance(item, bool) or item < 1 or item > limit:
            raise ValidationError(
                "Each concurrency must be a whole number from 1 to %(limit)s (got %(item)r).",
                params={"limit": limit, "item": item},
            )


def validate_file_mix(value: object) -> None:
    if value in (None, []):
        return
    if not isinstance(value, list):
        raise ValidationError('A file mix is a list such as [{"count": 9000, "size": 9000000000}].')
    for item in value:
        if not isinstance(item, dict) or set(item) != {"count", "size"}:
            raise ValidationError('Each mix entry needs exactly "count" and "size".')
        for key in ("count", "size"):
            number = item[key]
            if not isinstance(number, int) or isinstance(number, bool) or number < 1:
                raise ValidationError(
                    "In the file mix, %(key)s must be a whole number of at least 1 (got %(value)r).",
                    params={"key": key, "value": number},
                )


class Campaign(BaseModel):
    """A reusable test definition; each execution is a Run that freezes these values."""

    name = models.CharField(max_length=100, unique=True, validators=[name_validator])
    description = models.TextField(blank=True)
    kind = models.CharField(max_length=20, choices=choices.CampaignKind.choices, default="transfer")
    # A callable: the engines register when the app is ready, after this class (engine_registry).
    engine = models.CharField(max_length=10, choices=engine_registry.engine_choices, default="gfal2")
    sources = models.ManyToManyField(Endpoint, related_name="source_of_campaigns")
    destinations = models.ManyToManyField(Endpoint, related_name="destination_of_campaigns", blank=True)
    clients = models.ManyToManyField(
        "collectors.Host", related_name="client_of_campaigns", blank=True, limit_choices_to={"role": "client"},
        help_text="Client hosts that share each step's copies (each runs manage.py client); none: one worker.",
    )  # fmt: skip
    source_path = models.CharField(
        max_length=300,
        default="storageops/source",
        validators=[validate_relative_path],
        help_text="Where the source files live, relative to each source endpoint.",
    )
    destination_path = models.CharField(
        max_length=300,
        default="storageops/runs",
        validators=[validate_relative_path],
        help_text="Each run writes below <destination>/<this path>/run-<id>/.",
    )
    create_sources = models.BooleanField(
        default=False, help_text="Upload generated data to the sources before the run starts."
    )
    source_listing = models.CharField(
        "existing data",
        max_length=10,
        choices=choices.SourceListing.choices,
        default="",
        blank=True,
        help_text="Read existing files instead of named or generated ones: every file directly in the "
        "source path of each source endpoint (listed when a run starts), or the URLs listed below. "
        "Existing data is only read: never written, never cleaned up.",
    )
    source_urls = models.TextField(
        "source URLs",
        blank=True,
        validators=[validate_source_url_list],
        help_text="With 'a list of URLs': one URL a line, each below one of the source endpoints.",
    )
    file_count = models.PositiveIntegerField(default=100, validators=[MinValueValidator(1), INT32])
    file_size = models.PositiveBigIntegerField(
        "file size (bytes)", default=100 * 1000**2, validators=[MinValueValidator(1)]
    )
    file_mix = models.JSONField(
        default=list,
        blank=True,
        validators=[validate_file_mix],
        help_text='Overrides count × size, e.g. [{"count": 9000, "size": 9e9}, {"count": 6000, "size": 4e9}].',
    )
    source_file_count = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1), INT32],
        help_text="Distinct source files reused in turn; empty means one source file per transfer.",
    )
    direction = models.CharField(max_length=10, choices=choices.Direction.choices, default="forward")
    tpc_mode = models.CharField("copy mode", max_length=10, choices=choices.TpcMode.choices, default="auto")
    checksum_mode = models.CharField(max_length=10, choices=choices.ChecksumMode.choices, default="both")
    checksum_algorithm = models.CharField(max_length=10, choices=choices.ChecksumAlgorithm.choices, default="adler32")
    streams = models.PositiveSmallIntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(64)], help_text="Parallel streams per copy."
    )
    tcp_buffer_size = models.PositiveIntegerField(
        "TCP buffer size (bytes)", default=0, validators=[INT32], help_text="0 leaves the plugin's default."
    )
    timeout = models.PositiveIntegerField(
        "timeout (s)", default=3600, validators=[MinValueValidator(1), MaxValueValidator(7 * 86400)]
    )
    overwrite = models.BooleanField(default=True)
    create_parent = models.BooleanField(default=True)
    retries = models.PositiveSmallIntegerField(default=0, validators=[MaxValueValidator(10)])
    retry_delay = models.PositiveIntegerField(
        "retry delay (s)",
        default=10,
        validators=[MaxValueValidator(3600)],
        help_text="A failed attempt waits this long before its retry, doubling with each attempt: a door that "
        "restarts in under a minute loses no file.",
    )
    concurrency_steps = models.JSONField(
        default=default_concurrency_steps,
        validators=[validate_concurrency_steps],
        help_text="One value for a fixed concurrency, several for a sweep, e.g. [1, 2, 4, 8].",
    )
    sweep = models.JSONField(
        default=dict,
        blank=True,
        validators=[sweep_rules.validate_sweep],
        help_text='Other knobs to step through, each at every concurrency step, e.g. {"streams": [1, 4, 8]} '
        "(axes: tpc_mode, tcp_buffer_size, streams; several make a matrix). Empty: none.",
    )
    step_seconds = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1), INT32], help_text="Each step lasts this long…"
    )
    step_files = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1), INT32], help_text="…or until this many files finished."
    )
    step_barrier = models.CharField(
        max_length=10,
        choices=choices.StepBarrier.choices,
        default=choices.StepBarrier.DRAIN,
        help_text="With a drain, no copy of a step runs beside the next step's: each step measures its own "
        "concurrency.",
    )
    start_together = models.BooleanField(
        default=False,
        help_text="A step's copies begin at the same moment (client-count sweeps: all clients start at once).",
    )
    max_bytes = models.PositiveBigIntegerField(
        "byte budget",
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Stop cleanly once this many bytes were moved.",
    )
    max_duration = models.PositiveIntegerField(
        "duration budget (s)", null=True, blank=True, validators=[MinValueValidator(1), INT32]
    )
    target_rate_bps = models.PositiveBigIntegerField(
        "target rate (bit/s)",
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="The rate the capacity projection sizes doors for, e.g. 40000000000 for a 40 Gb/s site "
        "link; empty uses STORAGEOPS_TARGET_RATE_BPS.",
    )
    regression_threshold = models.PositiveSmallIntegerField(
        "regression threshold (%)",
        default=50,
        validators=[MinValueValidator(10), MaxValueValidator(95)],
        help_text="A run whose throughput (or a copy time) is this share of the median of its baseline runs worse "
        "is regressed, however much those runs spread; the band is never wider.",
    )
    cancel_grace = models.PositiveIntegerField(
        "cancel grace (s)",
        default=10,
        validators=[MaxValueValidator(3600)],
        help_text="On cancel, in-flight copies may finish within this time before they are aborted.",
    )
    max_bytes_per_day = models.PositiveBigIntegerField(
        "daily byte budget",
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Bytes all runs of this campaign may move per day (site time zone); a run stops at what is left.",
    )
    max_bytes_per_week = models.PositiveBigIntegerField(
        "weekly byte budget",
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="The same per ISO week (Monday to Sunday).",
    )
    allow_overlap = models.BooleanField(
        default=False,
        help_text="Let a scheduled run start while another run writes to the same destination endpoint or backend.",
    )
    cleanup = models.CharField(
        "clean-up",
        max_length=10,
        choices=choices.Cleanup.choices,
        default=choices.Cleanup.KEEP,
        help_text="Delete the files a run wrote (below its run-<id>/ folder) when it ends, or keep them.",
    )
    engine_options = models.JSONField(
        default=dict,
        blank=True,
        help_text="The engine's own options, a JSON object checked by the engine's schema ({} for an engine "
        "that takes none; the API schema lists each engine's).",
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("campaigns:campaign_detail", args=[self.pk])

    def clean(self) -> None:
        # The rules of its own fields; those against its endpoints and clients are checked with the
        # ones about to be saved (campaign_rules.relation_errors), by the form, the API and the admin.
        if errors := campaign_rules.field_errors(self):
            raise ValidationError(errors)

    @property
    def planned_files(self) -> int:
        if self.file_mix:
            return sum(item["count"] for item in self.file_mix)
        return self.file_count

    @property
    def planned_bytes(self) -> int:
        if self.file_mix:
            return sum(item["count"] * item["size"] for item in self.file_mix)
        return sweep_rules.swept_bytes(self) or self.file_count * self.file_size

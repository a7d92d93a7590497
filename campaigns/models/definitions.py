"""What is tested and how: backends, endpoints and campaigns."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.urls import reverse

from campaigns import choices
from campaigns.models import engine_registry, engine_rules, sweep_rules
from storageops.models import BaseModel
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
    # Credentials are per endpoint; the token is write-only in forms and the API and never logged.
    bearer_token = models.TextField(blank=True, help_text="Bearer token sent to this endpoint (write-only).")
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


def file_size_error(size: int) -> str:
    """Why files of `size` bytes may not be planned, or "" when they may."""
    limit = settings.STORAGEOPS_MAX_FILE_SIZE
    if size > limit:
        return f"Files of up to {limit:,} bytes may be planned (STORAGEOPS_MAX_FILE_SIZE); got {size:,}."
    return ""


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
        help_text="The engine's own options, checked by its schema: none for gfal2 ({}); for FTS3 "
        '{"instance": <FTS instance id>, "priority": 1-5 (3), "strict_copy": false}.',
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("campaigns:campaign_detail", args=[self.pk])

    def clean(self) -> None:
        errors: dict[str, str] = {}
        steps = self.concurrency_steps
        if sweep_rules.step_count(steps, self.sweep) > 1 and not (self.step_seconds or self.step_files):
            errors["step_seconds"] = "A sweep of several steps needs a step length in seconds or files."
        errors.update(sweep_rules.sweep_errors(self))
        copies = self.kind == choices.CampaignKind.TRANSFER
        if (
            copies
            and self.checksum_mode in (choices.ChecksumMode.SOURCE, choices.ChecksumMode.TARGET)
            and not (self.create_sources or self.source_listing)
        ):
            # gfal2 compares one side against an expected value, known only for data StorageOps made.
            errors["checksum_mode"] = (
                "Source-only or target-only checks compare against the data's known checksum: "
                "let StorageOps create the source files, or check both sides."
            )
        if isinstance(steps, list) and self.step_files and steps and max(steps) > self.step_files:
            errors["step_files"] = (
                f"A step of {self.step_files} files cannot run {max(steps)} copies at once: make it at least "
                f"{max(steps)} files (several times that measures the step better), or lower the largest step."
            )
        errors.update(self._size_errors())
        errors.update(self._listing_errors())
        if self.kind == choices.CampaignKind.CHECKSUM_LOAD and self.file_mix:
            errors["file_mix"] = "A checksum load asks for checksums of files of one size: leave the mix empty."
        errors = {**engine_rules.engine_errors(self), **errors}  # the engine's own, where nothing else is wrong
        # The endpoints a form is about to save (set by its clean), else those of a saved campaign.
        endpoints = getattr(self, "pending_endpoints", None) or (
            (self.sources.all(), self.destinations.all()) if self.pk else None
        )
        if "tpc_mode" not in errors and endpoints:
            problem = engine_rules.copy_mode_error(
                self.engine, self.kind, self.tpc_mode, self.sweep, self.direction, *endpoints
            )
            if problem:
                errors["tpc_mode"] = problem
        if errors:
            raise ValidationError(errors)

    def _listing_errors(self) -> dict[str, str]:
        """Existing data: read only, sizes from the storage, transfers only."""
        if not self.source_listing:
            return {"source_urls": "Choose 'a list of URLs' to use them."} if self.source_urls.strip() else {}
        errors: dict[str, str] = {}
        if self.create_sources:
            errors["create_sources"] = (
                "Existing data is only read: StorageOps does not write sources it did not create. "
                "Untick this, or choose generated files."
            )
        if self.file_mix:
            errors["file_mix"] = "With existing data, the files and their sizes are the storage's: leave the mix empty."
        if self.kind != choices.CampaignKind.TRANSFER:
            errors["source_listing"] = "Existing data can be the source of transfers only."
        elif self.direction != choices.Direction.FORWARD:
            errors["direction"] = "Existing data is read from the sources only: choose the forward direction."
        if self.source_listing == choices.SourceListing.URLS and not self.source_urls.strip():
            errors["source_urls"] = "List at least one URL, one a line."
        if self.source_listing == choices.SourceListing.FOLDER and self.source_urls.strip():
            errors["source_urls"] = "A listed folder takes no URL list: empty it, or choose 'a list of URLs'."
        return errors

    def _size_errors(self) -> dict[str, str]:
        mix = self.file_mix if isinstance(self.file_mix, list) else []
        if not all(
            isinstance(m, dict) and isinstance(m.get("size"), int) and isinstance(m.get("count"), int) for m in mix
        ):
            return {}  # the mix's own validator says what is wrong with it
        sizes = [item["size"] for item in mix]
        field = "file_mix" if sizes else "file_size"
        sizes = sizes or [self.file_size or 0]
        if too_large := file_size_error(max(sizes)):
            return {field: too_large}
        if self.planned_bytes >= 2**63:
            return {field: "The campaign plans more bytes than can be counted (2^63): fewer or smaller files."}
        return {}

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

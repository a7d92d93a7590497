"""What is tested and how: backends, endpoints, campaigns, runs and their transfers."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.urls import reverse

from campaigns import choices
from storageops.models import BaseModel
from storageops.validators import validate_relative_path, validate_transfer_url

name_validator = RegexValidator(
    r"^[A-Za-z0-9][A-Za-z0-9 ._\-]*$",
    "Use letters, digits, spaces, dots, dashes and underscores, starting with a letter or digit.",
)


def validate_absolute_path(value: str) -> None:
    if not value.startswith("/") or "\x00" in value:
        raise ValidationError("Give an absolute path on the worker, e.g. /etc/grid-security/certificates.")


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
        validators=[validate_transfer_url],
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


class Campaign(BaseModel):
    """A reusable test definition; each execution is a Run that freezes these values."""

    name = models.CharField(max_length=100, unique=True, validators=[name_validator])
    description = models.TextField(blank=True)
    kind = models.CharField(max_length=20, choices=choices.CampaignKind.choices, default="transfer")
    engine = models.CharField(max_length=10, choices=choices.Engine.choices, default="gfal2")
    sources = models.ManyToManyField(Endpoint, related_name="source_of_campaigns")
    destinations = models.ManyToManyField(Endpoint, related_name="destination_of_campaigns", blank=True)
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
    file_count = models.PositiveIntegerField(default=100, validators=[MinValueValidator(1)])
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
        validators=[MinValueValidator(1)],
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
        "TCP buffer size (bytes)", default=0, help_text="0 leaves the plugin's default."
    )
    timeout = models.PositiveIntegerField(
        "timeout (s)", default=3600, validators=[MinValueValidator(1), MaxValueValidator(7 * 86400)]
    )
    overwrite = models.BooleanField(default=True)
    create_parent = models.BooleanField(default=True)
    retries = models.PositiveSmallIntegerField(default=0, validators=[MaxValueValidator(10)])
    concurrency_steps = models.JSONField(
        default=default_concurrency_steps,
        validators=[validate_concurrency_steps],
        help_text="One value for a fixed concurrency, several for a sweep, e.g. [1, 2, 4, 8].",
    )
    step_seconds = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1)], help_text="Each step lasts this long…"
    )
    step_files = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1)], help_text="…or until this many files finished."
    )
    max_bytes = models.PositiveBigIntegerField(
        "byte budget",
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Stop cleanly once this many bytes were moved.",
    )
    max_duration = models.PositiveIntegerField(
        "duration budget (s)", null=True, blank=True, validators=[MinValueValidator(1)]
    )
    target_rate_bps = models.PositiveBigIntegerField(
        "target rate (bit/s)",
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="The rate the capacity projection sizes doors for, e.g. 40000000000 for a 40 Gb/s site "
        "link; empty uses STORAGEOPS_TARGET_RATE_BPS.",
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
    # The FTS engine's own knobs (ignored by gfal2 runs).
    fts_instance = models.ForeignKey(
        "campaigns.FtsInstance",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="campaigns",
        help_text="The FTS3 server that runs this campaign's transfers (engine FTS3).",
    )
    fts_priority = models.PositiveSmallIntegerField(
        "FTS priority", default=3, validators=[MinValueValidator(1), MaxValueValidator(5)]
    )
    fts_strict_copy = models.BooleanField(
        "FTS strict copy", default=False, help_text="Copy only: no checksum, size or parent-directory checks."
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
        if isinstance(steps, list) and len(steps) > 1 and not (self.step_seconds or self.step_files):
            errors["step_seconds"] = "A sweep of several steps needs a step length in seconds or files."
        copies = self.kind == choices.CampaignKind.TRANSFER
        if (
            copies
            and self.checksum_mode in (choices.ChecksumMode.SOURCE, choices.ChecksumMode.TARGET)
            and not (self.create_sources)
        ):
            # gfal2 compares one side against an expected value, known only for data StorageOps made.
            errors["checksum_mode"] = (
                "Source-only or target-only checks compare against the data's known checksum: "
                "let StorageOps create the source files, or check both sides."
            )
        if self.kind == choices.CampaignKind.CHECKSUM_LOAD and self.file_mix:
            errors["file_mix"] = "A checksum load asks for checksums of files of one size: leave the mix empty."
        if self.engine == choices.Engine.FTS and self.tpc_mode == choices.TpcMode.STREAMED:
            errors["tpc_mode"] = "FTS does third-party copies; streamed mode needs the gfal2 engine."
        if self.engine == choices.Engine.FTS and not self.fts_instance_id:
            errors["fts_instance"] = "Choose the FTS instance that runs this campaign's transfers."
        if errors:
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
        return self.file_count * self.file_size


class Run(models.Model):
    """One execution of a campaign, with the parameters frozen at its start."""

    campaign = models.ForeignKey(Campaign, on_delete=models.PROTECT, related_name="runs")
    state = models.CharField(max_length=12, choices=choices.RunState.choices, default="pending", db_index=True)
    trigger = models.CharField(max_length=10, choices=choices.RunTrigger.choices, default="web")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The frozen campaign, endpoints, backends and hosts, so a result can always be explained.
    snapshot = models.JSONField(default=dict, blank=True)
    versions = models.JSONField(default=dict, blank=True)
    planned_files = models.PositiveIntegerField(default=0)
    planned_bytes = models.PositiveBigIntegerField(default=0)
    files_done = models.PositiveIntegerField(default=0)
    files_failed = models.PositiveIntegerField(default=0)
    files_skipped = models.PositiveIntegerField(default=0, help_text="Never tried (budget, stop) or cancelled.")
    bytes_done = models.PositiveBigIntegerField(default=0)
    current_step = models.PositiveSmallIntegerField(null=True, blank=True)
    current_concurrency = models.PositiveIntegerField(null=True, blank=True)
    active_transfers = models.PositiveIntegerField(default=0)
    throughput_bps = models.FloatField(null=True, blank=True, help_text="Bytes/s over the last 10 s.")
    eta_seconds = models.FloatField(null=True, blank=True)
    progress_at = models.DateTimeField(null=True, blank=True)
    stop_reason = models.CharField(max_length=200, blank=True)
    error = models.TextField(blank=True)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    # The lease of the worker driving the run: a silent driver's run is taken over.
    executor = models.CharField(max_length=200, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    summary = models.JSONField(default=dict, blank=True)
    disturbed = models.BooleanField(
        default=False, help_text="A restart or config change of its hosts, backends or endpoints fell in its window."
    )

    class Meta:
        ordering = ["-created"]
        indexes = [models.Index(fields=["campaign", "-created"])]
        permissions = [("start_run", "Can start runs"), ("cancel_run", "Can cancel runs")]

    def __str__(self) -> str:
        return f"{self.campaign.name} #{self.pk}"

    def get_absolute_url(self) -> str:
        return reverse("campaigns:run_detail", args=[self.pk])

    @property
    def is_live(self) -> bool:
        return self.state in choices.ACTIVE_RUN_STATES

    @property
    def progress_percent(self) -> float:
        if not self.planned_files:
            return 0.0
        finished = self.files_done + self.files_failed + self.files_skipped
        return round(100.0 * finished / self.planned_files, 1)


class RunStep(models.Model):
    """One concurrency step of a run: its window is what per-step throughput is measured over."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="steps")
    index = models.PositiveSmallIntegerField()
    concurrency = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["run", "index"]
        constraints = [models.UniqueConstraint(fields=["run", "index"], name="runstep_unique_index")]

    def __str__(self) -> str:
        return f"{self.run_id} step {self.index} ×{self.concurrency}"


class Transfer(models.Model):
    """One planned file copy; it ends with exactly one final state, however often it is tried."""

    # Few indexes on purpose: every state change of a transfer rewrites an entry in each of
    # them, and at thousands of transfers a second that is the driver's main database cost.
    # (run, index) is unique and leads with run, so run needs no index of its own.
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="transfers", db_index=False)
    index = models.PositiveIntegerField()
    step = models.PositiveSmallIntegerField(null=True, blank=True)
    source = models.TextField()
    destination = models.TextField()
    source_endpoint = models.ForeignKey(Endpoint, on_delete=models.PROTECT, related_name="+", db_index=False)
    destination_endpoint = models.ForeignKey(Endpoint, on_delete=models.PROTECT, related_name="+", db_index=False)
    size = models.PositiveBigIntegerField(help_text="Planned bytes.")
    state = models.CharField(max_length=10, choices=choices.TransferState.choices, default="queued")
    attempt = models.PositiveSmallIntegerField(
        default=0,
        help_text="Hand-overs to a copy thread. After a worker crash, the transfers it had handed over "
        "(copying, or queued in its memory) are retried and count one attempt more.",
    )
    executor = models.CharField(max_length=200, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    duration = models.FloatField("duration (s)", null=True, blank=True)
    bytes_transferred = models.PositiveBigIntegerField(null=True, blank=True)
    throughput_bps = models.FloatField(null=True, blank=True)
    error_category = models.CharField(max_length=20, choices=choices.ErrorCategory.choices, blank=True)
    error_code = models.IntegerField(null=True, blank=True)
    error_message = models.TextField(blank=True)
    copy_mode = models.CharField(max_length=20, blank=True, help_text="The mode the engine reports it used.")
    source_checksum = models.CharField(max_length=128, blank=True)
    destination_checksum = models.CharField(max_length=128, blank=True)
    # Filled by the FTS engine; database defaults so the plan's COPY need not name them.
    fts_job_id = models.CharField("FTS job id", max_length=64, blank=True, default="", db_default="")
    fts_file_id = models.BigIntegerField("FTS file id", null=True, blank=True)
    transfer_host = models.CharField(
        max_length=255, blank=True, default="", db_default="", help_text="The FTS node that ran the copy."
    )

    class Meta:
        ordering = ["run", "index"]
        constraints = [models.UniqueConstraint(fields=["run", "index"], name="transfer_unique_index")]
        indexes = [
            # Partial: a transfer leaves it when claimed and never comes back unless retried.
            models.Index(fields=["run", "index"], name="transfer_queued_idx", condition=models.Q(state="queued")),
            models.Index(fields=["run", "finished_at"], name="transfer_run_time_idx"),
            models.Index(
                fields=["run", "error_category"], name="transfer_run_error_idx", condition=models.Q(state="failed")
            ),
        ]

    def __str__(self) -> str:
        return f"{self.run_id}/{self.index}"


WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


def parse_weekdays(value: str) -> set[int]:
    """'mon-fri' or 'mon,wed,sat' → {0, 1, 2, 3, 4} (Monday is 0); blank means every day."""
    days: set[int] = set()
    for part in filter(None, (p.strip().lower() for p in value.split(","))):
        first, _, last = part.partition("-")
        if first not in WEEKDAYS or (last and last not in WEEKDAYS):
            raise ValueError(f"{part!r} is not a weekday or a range of them (use mon…sun, e.g. mon-fri)")
        lo, hi = WEEKDAYS.index(first), WEEKDAYS.index(last or first)
        days.update(range(lo, hi + 1) if lo <= hi else [*range(lo, 7), *range(0, hi + 1)])
    return days or set(range(7))


def validate_weekdays(value: str) -> None:
    try:
        parse_weekdays(value)
    except ValueError as exc:
        raise ValidationError(str(exc)) from None


def validate_time_zone(value: str) -> None:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValidationError(
            "%(tz)r is not a known time zone (e.g. Europe/Prague, UTC).", params={"tz": value}
        ) from None


def validate_cron(value: str) -> None:
    from django_celery_beat.validators import crontab_validator

    if len(value.split()) != 5:
        raise ValidationError("Give five cron fields: minute hour day-of-month month day-of-week, e.g. '0 9 * * 1-5'.")
    crontab_validator(value)


# What an operator sets on a schedule (the form and the API); the rest is kept by the service.
SCHEDULE_SETTINGS = (
    "enabled",
    "kind",
    "cron",
    "interval_minutes",
    "time_zone",
    "window_days",
    "window_start",
    "window_end",
    "max_slip_minutes",
    "max_runs",
)


class CampaignSchedule(BaseModel):
    """When a campaign starts by itself; it owns the beat PeriodicTask that fires it.

    Beat only says "now"; whether a start really happens (window, slip, overlap, budgets,
    max runs) is decided when it fires, and every refusal is recorded as an Event.
    """

    campaign = models.OneToOneField(Campaign, on_delete=models.CASCADE, related_name="schedule")
    enabled = models.BooleanField(default=True)
    kind = models.CharField(max_length=10, choices=choices.ScheduleKind.choices, default=choices.ScheduleKind.CRON)
    cron = models.CharField(
        max_length=100, blank=True, validators=[validate_cron], help_text="e.g. '0 2 * * *' for 02:00 every night."
    )
    interval_minutes = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1), MaxValueValidator(366 * 24 * 60)]
    )
    time_zone = models.CharField(
        max_length=64, default="UTC", validators=[validate_time_zone], help_text="The site's time zone."
    )
    window_days = models.CharField(
        "allowed days",
        max_length=40,
        blank=True,
        validators=[validate_weekdays],
        help_text="e.g. mon-fri; blank means every day.",
    )
    window_start = models.TimeField("allowed from", null=True, blank=True, help_text="e.g. 09:00; blank: any time.")
    window_end = models.TimeField("allowed until", null=True, blank=True, help_text="e.g. 16:00 (may wrap midnight).")
    max_slip_minutes = models.PositiveIntegerField(
        "max slip (minutes)",
        default=10,
        validators=[MaxValueValidator(7 * 24 * 60)],
        help_text="Start at most this late after the due time, else skip (and say why).",
    )
    max_runs = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1)], help_text="Stop after this many scheduled runs."
    )
    runs_started = models.PositiveIntegerField(default=0, editable=False)
    last_due_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_decision = models.CharField(max_length=300, blank=True, editable=False)
    periodic_task = models.OneToOneField(
        "django_celery_beat.PeriodicTask", null=True, blank=True, editable=False, on_delete=models.SET_NULL
    )

    class Meta:
        ordering = ["campaign__name"]

    def __str__(self) -> str:
        return f"{self.campaign.name}: {self.describe()}"

    def describe(self) -> str:
        when = f"cron '{self.cron}'" if self.kind == choices.ScheduleKind.CRON else f"every {self.interval_minutes} min"
        return f"{when} ({self.time_zone})"

    @property
    def exhausted(self) -> bool:
        return self.max_runs is not None and self.runs_started >= self.max_runs

    def clean(self) -> None:
        errors: dict[str, str] = {}
        if self.kind == choices.ScheduleKind.CRON and not self.cron:
            errors["cron"] = "A cron schedule needs a cron expression, e.g. '0 9 * * 1-5'."
        if self.kind == choices.ScheduleKind.INTERVAL and not self.interval_minutes:
            errors["interval_minutes"] = "An interval schedule needs a number of minutes."
        if (self.window_start is None) != (self.window_end is None):
            errors["window_end"] = "Give both ends of the allowed time window, or neither."
        elif self.window_start is not None and self.window_start == self.window_end:
            errors["window_end"] = "The window's end must differ from its start."
        if errors:
            raise ValidationError(errors)


from campaigns.models_fts import FtsInstance, FtsLinkLimit  # noqa: E402,F401  (models of this app)


class RunChart(models.Model):
    """A finished run's time series, computed once at its end: a chart of a million-transfer
    run must not re-read a million rows on every page view."""

    run = models.OneToOneField(Run, on_delete=models.CASCADE, primary_key=True, related_name="chart")
    computed_at = models.DateTimeField(auto_now=True)
    data = models.JSONField(default=dict)

    def __str__(self) -> str:
        return f"chart of run {self.run_id}"

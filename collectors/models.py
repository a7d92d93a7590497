"""What the hosts say: hosts, their metric samples, and the change & restart log."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.urls import reverse
from django.utils import timezone

from collectors import choices
from storageops.models import BaseModel
from storageops.paths import confine_local
from storageops.validators import validate_http_url

host_name_validator = RegexValidator(
    r"^[a-z0-9][a-z0-9.\-_]{0,62}$",
    "Use lower-case letters, digits, dots, dashes and underscores (it names the collector's queue).",
)


def validate_path_list(value: object) -> None:
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        raise ValidationError('Give a list of absolute paths, e.g. ["/etc/xrootd/xrootd-door.cfg"].')
    for path in value:
        confine_local(path)  # the one path rule (storageops.paths)


def validate_services(value: object) -> None:
    """[{"name": "xrootd", "process": "xrootd"} or {"name": ..., "pidfile": "/run/x.pid"}]."""
    if not isinstance(value, list):
        raise ValidationError('Give a list such as [{"name": "xrootd", "process": "xrootd"}].')
    for item in value:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
            raise ValidationError("Each watched service needs a name.")
        if not set(item) <= {"name", "process", "pidfile", "systemd_unit"}:
            raise ValidationError("A watched service takes only name, process, pidfile and systemd_unit.")
        if not any(item.get(k) for k in ("process", "pidfile", "systemd_unit")):
            raise ValidationError(
                "Say how to find service %(name)r: process, pidfile or systemd_unit.", params={"name": item["name"]}
            )
        if item.get("pidfile"):
            confine_local(str(item["pidfile"]))


def validate_log_files(value: object) -> None:
    """[{"path": "/var/log/xrootd/xrootd.log", "patterns": {"checksum_error": "regex"}}]."""
    import re

    if not isinstance(value, list):
        raise ValidationError('Give a list such as [{"path": "/var/log/xrootd/door.log"}].')
    for item in value:
        if not isinstance(item, dict) or not item.get("path"):
            raise ValidationError("Each log file needs an absolute path.")
        confine_local(str(item["path"]))
        for name, pattern in (item.get("patterns") or {}).items():
            try:
                re.compile(pattern)
            except (re.error, TypeError) as exc:
                raise ValidationError(
                    "Pattern %(name)r is not a valid regular expression: %(err)s", params={"name": name, "err": exc}
                ) from None


class Host(BaseModel):
    """A storage server (door, pool, OSS) with an optional collector and node_exporter."""

    name = models.CharField(max_length=63, unique=True, validators=[host_name_validator])
    address = models.CharField(max_length=255, blank=True, help_text="FQDN or IP address.")
    role = models.CharField(max_length=10, choices=choices.HostRole.choices, default="door")
    node_exporter_url = models.CharField(
        max_length=300,
        blank=True,
        validators=[validate_http_url],
        help_text="e.g. http://door1.example.org:9100/metrics",
    )
    link_speed_bps = models.PositiveBigIntegerField(
        "link speed (bit/s)", null=True, blank=True, help_text="For network saturation, e.g. 25000000000."
    )
    sample_interval = models.PositiveSmallIntegerField(
        "sample interval (s)", default=5, validators=[MinValueValidator(1), MaxValueValidator(3600)]
    )
    watched_files = models.JSONField(default=list, blank=True, validators=[validate_path_list])
    watched_services = models.JSONField(default=list, blank=True, validators=[validate_services])
    watched_filesystems = models.JSONField(
        default=list,
        blank=True,
        validators=[validate_path_list],
        help_text='Data folders whose free space is sampled; a full one is logged, e.g. ["/data/xrootd"].',
    )
    log_files = models.JSONField(default=list, blank=True, validators=[validate_log_files])
    client_weight = models.PositiveSmallIntegerField(
        default=1,
        validators=[MinValueValidator(1), MaxValueValidator(100)],
        help_text="A client's share of each step's concurrency, relative to the other clients of a pool.",
    )
    collector_version = models.CharField(max_length=50, blank=True)
    last_seen = models.DateTimeField(null=True, blank=True)
    notes = models.TextField(blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("collectors:host_detail", args=[self.pk])

    @property
    def queue(self) -> str:
        return f"host.{self.name}"

    @property
    def client_queue(self) -> str:
        return f"client.{self.name}"


class MetricSample(models.Model):
    """One value of one metric of one host at one time (label: device, interface or process)."""

    host = models.ForeignKey(Host, on_delete=models.CASCADE, related_name="samples")
    metric = models.CharField(max_length=64)
    label = models.CharField(max_length=64, blank=True)
    time = models.DateTimeField()
    value = models.FloatField()

    class Meta:
        indexes = [models.Index(fields=["host", "metric", "time"], name="sample_host_metric_time_idx")]

    def __str__(self) -> str:
        return f"{self.host_id} {self.metric}{{{self.label}}}={self.value}"


class MetricRollup(models.Model):
    """Samples older than the retention age, downsampled: one row per host, metric, label and bucket."""

    host = models.ForeignKey(Host, on_delete=models.CASCADE, related_name="rollups")
    metric = models.CharField(max_length=64)
    label = models.CharField(max_length=64, blank=True)
    time = models.DateTimeField(help_text="Start of the bucket.")
    seconds = models.PositiveIntegerField(help_text="Length of the bucket.")
    count = models.PositiveIntegerField()
    mean = models.FloatField()
    minimum = models.FloatField()
    maximum = models.FloatField()

    class Meta:
        indexes = [models.Index(fields=["host", "metric", "time"], name="rollup_host_metric_time_idx")]

    def __str__(self) -> str:
        return f"{self.host_id} {self.metric}{{{self.label}}}@{self.time:%Y-%m-%d %H:%M} mean={self.mean}"


class Event(models.Model):
    """The change & restart log of the storage side (and StorageOps' own run starts/ends)."""

    time = models.DateTimeField(default=timezone.now, db_index=True)
    kind = models.CharField(max_length=20, choices=choices.EventKind.choices)
    source = models.CharField(max_length=12, choices=choices.EventSource.choices, default="operator")
    host = models.ForeignKey(Host, null=True, blank=True, on_delete=models.SET_NULL, related_name="events")
    # The backend, endpoint and run an event is about, by id and without a foreign key (as
    # NetBox's journal refers to objects): the apps above collectors own those models, and the
    # log keeps what happened after they are deleted (pages show "#12 (deleted)").
    # collectors.references turns the ids into objects, in bulk, through resolvers they register.
    backend_id = models.BigIntegerField(null=True, blank=True, db_index=True)
    endpoint_id = models.BigIntegerField(null=True, blank=True, db_index=True)
    run_id = models.BigIntegerField(null=True, blank=True, db_index=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    who = models.CharField(max_length=150, blank=True, help_text="Who, kept even if the user is deleted.")
    summary = models.CharField(max_length=300)
    detail = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-time"]
        indexes = [
            models.Index(fields=["host", "time"], name="event_host_time_idx"),
            models.Index(fields=["kind", "time"], name="event_kind_time_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.time:%Y-%m-%d %H:%M} {self.kind}: {self.summary}"


class HostTestSeries(models.Model):
    """A host test repeated N times (FZU's 50,000 dd runs of 1 GB), each result a row."""

    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    host = models.ForeignKey(Host, on_delete=models.CASCADE, related_name="test_series")
    tool = models.CharField(max_length=10)
    params = models.JSONField(help_text="The validated parameters (collectors.hosttest_series.SeriesParams).")
    repeats = models.PositiveIntegerField()
    byte_budget = models.PositiveBigIntegerField(help_text="Bytes the series may write; it stops there.")
    bytes_written = models.PositiveBigIntegerField(default=0)
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    cancel_requested = models.BooleanField(default=False)
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]
        verbose_name_plural = "host test series"

    def __str__(self) -> str:
        return f"{self.tool} series #{self.pk} on {self.host.name}"

    def get_absolute_url(self) -> str:
        return reverse("collectors:host_test_detail", args=[self.pk])

    LIVE_STATES = (State.QUEUED, State.RUNNING)

    @property
    def is_live(self) -> bool:
        return self.state in self.LIVE_STATES


class HostTestResult(models.Model):
    """One repeat of a series: what was written and read, and whether the read can be trusted."""

    series = models.ForeignKey(HostTestSeries, on_delete=models.CASCADE, related_name="results")
    index = models.PositiveIntegerField()
    time = models.DateTimeField()
    seconds = models.FloatField(help_text="The repeat's whole duration.")
    write_bps = models.FloatField(null=True, blank=True)
    read_bps = models.FloatField(null=True, blank=True)
    direct_read_bps = models.FloatField(null=True, blank=True, help_text="The O_DIRECT reference read, if asked.")
    iops = models.FloatField(null=True, blank=True)
    lat_p50_ms = models.FloatField(null=True, blank=True)
    lat_p99_ms = models.FloatField(null=True, blank=True)
    cached = models.BooleanField(
        default=False,
        help_text="The read's pages were in the page cache before it (resident_fraction): memory's figure.",
    )
    cached_reason = models.CharField(max_length=300, blank=True)
    resident_fraction = models.FloatField(
        null=True, blank=True,
        help_text="Share of the file's pages in the page cache just before the timed read (mincore, as fincore "
        "measures it); null where not measured (fio, which lays out and reads its files in one process).",
    )  # fmt: skip
    faster_than_direct = models.BooleanField(
        default=False,
        help_text="Not resident, yet more than twice as fast as the series' direct-I/O reads: readahead or the "
        "hypervisor's cache answered, not the page cache.",
    )
    faster_reason = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["series", "index"]
        constraints = [models.UniqueConstraint(fields=["series", "index"], name="hosttestresult_series_index")]

    def __str__(self) -> str:
        return f"result {self.index + 1} of series {self.series_id}"

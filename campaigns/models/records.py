"""What happened: runs, their concurrency steps, their transfers and their stored charts."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.urls import reverse

from campaigns import choices
from campaigns.models.definitions import Campaign, Endpoint


class Run(models.Model):
    """One execution of a campaign, with the parameters frozen at its start."""

    campaign = models.ForeignKey(Campaign, on_delete=models.PROTECT, related_name="runs")
    state = models.CharField(max_length=12, choices=choices.RunState.choices, default="pending", db_index=True)
    trigger = models.CharField(max_length=10, choices=choices.RunTrigger.choices, default="web")
    # Who started the run: a signed-in operator or an API token's owner; none for a schedule or
    # a command, which started_by_name names. The name stays when the user is deleted, and is
    # as long as the event log's "Who" it is copied to (collectors.Event.who).
    started_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    started_by_name = models.CharField(
        max_length=150,
        blank=True,
        help_text="Who or what started the run: the user's name, the schedule, or the management command.",
    )
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
    files_skipped = models.PositiveIntegerField(
        default=0, help_text="Never started (a budget, a stop, a cancel before they began)."
    )
    files_cancelled = models.PositiveIntegerField(
        default=0, help_text="Started, then stopped by a cancel (or by the run failing) before they ended."
    )
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
    # Set while copies are in flight and none has finished for STORAGEOPS_STALL_SECONDS.
    stalled_since = models.DateTimeField(null=True, blank=True)
    summary = models.JSONField(default=dict, blank=True)
    disturbed = models.BooleanField(
        default=False, help_text="A restart or config change of its hosts, backends or endpoints fell in its window."
    )
    # An operator's word on the run's place in its campaign's baselines, with who and why: the
    # rule leaves partial and disturbed runs out, and a site knows nights the rule cannot.
    baseline_choice = models.CharField(
        max_length=8, choices=choices.BaselineChoice.choices, default=choices.BaselineChoice.AUTO
    )
    baseline_reason = models.CharField(max_length=300, blank=True)
    baseline_chosen_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    baseline_chosen_at = models.DateTimeField(null=True, blank=True)
    # A run made by "retry failed": it re-drives the transfers of `retry_of` that did not succeed.
    retry_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="retries",
        help_text="The run whose failed, timed-out and skipped transfers this run re-drives.",
    )  # fmt: skip

    class Meta:
        ordering = ["-created"]
        indexes = [models.Index(fields=["campaign", "-created"])]
        permissions = [
            ("start_run", "Can start runs"),
            ("cancel_run", "Can cancel runs"),
            ("choose_baseline", "Can include or leave out a run of its campaign's baselines, and judge it again"),
        ]

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
        finished = self.files_done + self.files_failed + self.files_skipped + self.files_cancelled
        return round(100.0 * finished / self.planned_files, 1)


class RunStep(models.Model):
    """One concurrency step of a run: its window is what per-step throughput is measured over."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="steps")
    index = models.PositiveSmallIntegerField()
    concurrency = models.PositiveIntegerField()
    point = models.JSONField(
        default=dict, blank=True, help_text="The step's full parameter point: concurrency, streams, TCP buffer, mode."
    )
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    # When the copies in flight first reached the step's concurrency (FTS applies a new link
    # limit only at its optimizer's next pass): before it is the step's warm-up, left out of the
    # achieved concurrency. Null: measured from the step's first copy.
    measured_from = models.DateTimeField(
        null=True, blank=True, help_text="The step ran at its concurrency from here; before: its warm-up."
    )

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
    # FTS reports a file CANCELED whose copy its cancel signal reached too late: the file is whole
    # on the destination. A cancelled copy that had started is checked there (size, checksum).
    complete_on_destination = models.BooleanField(
        null=True, blank=True,
        help_text="Cancelled after it started, and found whole on the destination (size and checksum); "
        "False: not whole; empty: not checked or could not be.",
    )  # fmt: skip
    error_message = models.TextField(blank=True)
    copy_mode = models.CharField(max_length=20, blank=True, help_text="The mode the engine reports it used.")
    source_checksum = models.CharField(max_length=128, blank=True)
    destination_checksum = models.CharField(max_length=128, blank=True)
    # A failed attempt that will be retried waits until then; earlier attempts are kept, one
    # {attempt, started_at, finished_at, duration, category, code, message} each.
    retry_at = models.DateTimeField(null=True, blank=True)
    history = models.JSONField(default=list, blank=True)
    # A database default, so that the plan's COPY need not name it.
    transfer_host = models.CharField(
        max_length=255,
        blank=True,
        default="",
        db_default="",
        help_text="The host that ran the copy, as its engine reports it (a StorageOps client, a copy service's node).",
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
            # Partial, and small: only the copies under way, which the live page lists every 2 s.
            models.Index(fields=["run", "started_at"], name="transfer_active_idx", condition=models.Q(state="active")),
        ]

    def __str__(self) -> str:
        return f"{self.run_id}/{self.index}"


class RunChart(models.Model):
    """A finished run's time series, computed once at its end: a chart of a million-transfer
    run must not re-read a million rows on every page view."""

    run = models.OneToOneField(Run, on_delete=models.CASCADE, primary_key=True, related_name="chart")
    computed_at = models.DateTimeField(auto_now=True)
    data = models.JSONField(default=dict)

    def __str__(self) -> str:
        return f"chart of run {self.run_id}"

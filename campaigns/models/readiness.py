"""A functional readiness check of one endpoint, or a pair: what passed, step by step; and the
grid of checks that tries every endpoint and every pair at once."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.urls import reverse

from campaigns.models.definitions import Endpoint
from storageops.models import BaseModel


class ReadinessGrid(BaseModel):
    """One press of the grid page's button (or one daily firing): a check for every endpoint,
    and for every pair whose schemes share a third-party copy mode (campaigns.readiness.grid)."""

    class Trigger(models.TextChoices):
        MANUAL = "manual", "by hand"
        SCHEDULE = "schedule", "daily schedule"

    trigger = models.CharField(max_length=10, choices=Trigger.choices, default=Trigger.MANUAL)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Set once, by whichever check of the grid ends last (a conditional UPDATE): the grid's one alert.
    ended_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"readiness grid #{self.pk}"

    def get_absolute_url(self) -> str:
        return reverse("campaigns:readiness_grid_detail", args=[self.pk])


class ReadinessCheck(BaseModel):
    """Upload, stat, checksum, download, third-party copies both ways and delete, each step's
    outcome kept with the storage's own words (campaigns.readiness runs it)."""

    class State(models.TextChoices):
        QUEUED = "queued", "queued"
        RUNNING = "running", "running"
        PASSED = "passed", "passed"
        FAILED = "failed", "failed"
        CANCELLED = "cancelled", "cancelled"

    endpoint = models.ForeignKey(Endpoint, on_delete=models.CASCADE, related_name="readiness_checks")
    peer = models.ForeignKey(
        Endpoint,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="readiness_checks_as_peer",
        help_text="With a peer: third-party copies in both directions between the two.",
    )
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED, db_index=True)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    steps = models.JSONField(default=list, blank=True, help_text="One entry a step, in the order run.")
    summary = models.CharField(max_length=300, blank=True)
    grid = models.ForeignKey(ReadinessGrid, null=True, blank=True, on_delete=models.SET_NULL, related_name="checks")
    # The lease, as a run's: the worker running the check and its last sign of life (renewed every
    # second while a step works); the recovery task fails a check whose worker fell silent.
    executor = models.CharField(max_length=200, blank=True, editable=False)
    heartbeat_at = models.DateTimeField(null=True, blank=True, editable=False)
    cancel_requested_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        pair = f" ↔ {self.peer.name}" if self.peer_id else ""
        return f"readiness #{self.pk} {self.endpoint.name}{pair}"

    def clean(self) -> None:
        super().clean()
        if self.peer_id and self.peer_id == self.endpoint_id:
            raise ValidationError({"peer": "The peer must be another endpoint."})
        for field, ep in (("endpoint", self.endpoint if self.endpoint_id else None),
                          ("peer", self.peer if self.peer_id else None)):  # fmt: skip
            if ep is not None and ep.protocol == "mock":
                raise ValidationError({field: "A mock:// endpoint simulates copies: a readiness check needs storage."})

    def get_absolute_url(self) -> str:
        return reverse("campaigns:readiness_detail", args=[self.pk])

    @property
    def finished(self) -> bool:
        return self.state in FINISHED_STATES


FINISHED_STATES = (ReadinessCheck.State.PASSED, ReadinessCheck.State.FAILED, ReadinessCheck.State.CANCELLED)

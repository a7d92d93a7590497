"""Who is told what, and what was sent: alert subscriptions and their deliveries."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlsplit

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from storageops.models import BaseModel
from storageops.sealed import SealedCharField
from storageops.validators import validate_http_url


class AlertKind(models.TextChoices):
    REGRESSION = "regression", "a run judged regressed against its history"
    RUN_FAILED = "run_failed", "a scheduled run that ended partial or failed"
    STALL = "stall", "a run whose copies stopped finishing"
    COLLECTOR_SILENT = "collector_silent", "a host's collector gone silent"
    TEST = "test", "a test alert"
    # Sent to the subscriptions of regression: whoever was told a door slowed is told it is back.
    RECOVERED = "recovered", "a run back within its band after a regression"
    READINESS_FAILED = "readiness_failed", "a daily readiness grid with a check that did not pass"
    DISK_FULL = "disk_full", "a host's data filesystem full"


# Kinds a subscription does not name: a test is the test button's, a recovery goes with regression.
NOT_SUBSCRIBABLE = (AlertKind.TEST, AlertKind.RECOVERED)


def default_kinds() -> list[str]:
    return [
        AlertKind.REGRESSION, AlertKind.RUN_FAILED, AlertKind.STALL, AlertKind.COLLECTOR_SILENT,
        AlertKind.READINESS_FAILED, AlertKind.DISK_FULL,
    ]  # fmt: skip


def validate_kinds(value: object) -> None:
    known = set(AlertKind.values) - set(NOT_SUBSCRIBABLE)
    if not isinstance(value, list) or not value or not all(isinstance(k, str) and k in known for k in value):
        raise ValidationError(f"Give a non-empty list of: {', '.join(sorted(known))}.")


# A path segment shown as it is: a plain word ("hooks", "storage-alerts"). Anything else (digits,
# capitals, long runs: Mattermost's 26-character keys, Slack's T…/B…/token) may be the secret.
_PLAIN_SEGMENT = re.compile(r"[a-z_-]{1,20}")


def shown_path(url: str) -> str:
    """The URL's path with every segment that may be a secret masked, and its query's values."""
    parts = urlsplit(url)
    path = "/".join(s if not s or _PLAIN_SEGMENT.fullmatch(s) else "…" for s in parts.path.split("/"))
    query = "&".join(f"{name}=…" for name, _ in parse_qsl(parts.query, keep_blank_values=True))
    return path + (f"?{query}" if query else "")


def shown_url(url: str) -> str:
    """scheme://host:port/path as the webhook was given, less its secrets: a webhook's key sits in
    its path or query (Mattermost's and Slack's do), so pages and recorded errors mask those and
    keep where it points (an operator with two hooks on one host tells them apart by port and
    path). User and password are never shown."""
    parts = urlsplit(url)
    host = f"[{parts.hostname}]" if ":" in (parts.hostname or "") else parts.hostname
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:  # a port the validator would refuse: nothing of it is shown
        port = ""
    return f"{parts.scheme}://{host}{port}{shown_path(url)}"


class Subscription(BaseModel):
    """Alerts of some kinds, for one campaign or all of them, to an address and/or a webhook."""

    name = models.CharField(max_length=100, unique=True)
    campaign = models.ForeignKey(
        "campaigns.Campaign", null=True, blank=True, on_delete=models.CASCADE, related_name="alert_subscriptions",
        help_text="Empty: every campaign, and the site's collectors.",
    )  # fmt: skip
    kinds = models.JSONField(default=default_kinds, validators=[validate_kinds])
    email = models.EmailField(blank=True, help_text="Sent through Django's mail settings (STORAGEOPS_EMAIL_*).")
    # Its path or query is its secret: sealed in the database (storageops.sealed).
    webhook_url = SealedCharField(
        max_length=500, blank=True, validators=[validate_http_url],
        help_text="A Mattermost or Slack incoming webhook: JSON {\"text\": …} is POSTed to it.",
    )  # fmt: skip
    min_interval_minutes = models.PositiveIntegerField(
        default=30, validators=[MinValueValidator(0), MaxValueValidator(7 * 24 * 60)],
        help_text="At most one alert of a kind about a campaign in this time; the others are kept, not sent.",
    )  # fmt: skip
    repeat_ongoing_hours = models.PositiveIntegerField(
        "repeat an ongoing regression (hours)", default=24,
        validators=[MinValueValidator(1), MaxValueValidator(24 * 30)],
        help_text="A regression that lasts run after run is told again at most this often (its start and its "
        "recovery are told at once).",
    )  # fmt: skip
    active = models.BooleanField(default=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def webhook_shown(self) -> str:
        return shown_url(self.webhook_url) if self.webhook_url else ""

    def clean(self) -> None:
        super().clean()
        if not self.email and not self.webhook_url:
            raise ValidationError("Give an email address, a webhook URL, or both.")


class Delivery(models.Model):
    """One alert for one subscription: sent (each channel's outcome) or held back by the rate limit."""

    class State(models.TextChoices):
        SENT = "sent", "sent"
        FAILED = "failed", "failed"
        SUPPRESSED = "suppressed", "held back (rate limit)"

    subscription = models.ForeignKey(Subscription, on_delete=models.CASCADE, related_name="deliveries")
    kind = models.CharField(max_length=20, choices=AlertKind.choices)
    campaign = models.ForeignKey("campaigns.Campaign", null=True, blank=True, on_delete=models.SET_NULL)
    run = models.ForeignKey("campaigns.Run", null=True, blank=True, on_delete=models.SET_NULL)
    host = models.ForeignKey("collectors.Host", null=True, blank=True, on_delete=models.SET_NULL)
    time = models.DateTimeField(auto_now_add=True, db_index=True)
    subject = models.CharField(max_length=300)
    body = models.TextField()
    state = models.CharField(max_length=12, choices=State.choices)
    outcome = models.JSONField(default=dict, help_text="Per channel: ok, or the error it met.")

    class Meta:
        ordering = ["-time"]
        indexes = [models.Index(fields=["subscription", "kind", "campaign", "-time"])]

    def __str__(self) -> str:
        return f"{self.kind} to {self.subscription}: {self.state}"

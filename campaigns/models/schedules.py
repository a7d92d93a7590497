"""When a campaign starts by itself: cron or interval schedules and their start windows."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from campaigns import choices
from campaigns.models.definitions import INT32, Campaign
from storageops.models import BaseModel

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


FINISHED_MAX_RUNS = "max runs reached"
FINISHED_END_DATE = "past its end date"

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
    "ends_at",
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
        null=True,
        blank=True,
        validators=[MinValueValidator(1), INT32],
        help_text="Stop after this many scheduled runs.",
    )
    ends_at = models.DateTimeField(
        "ends at", null=True, blank=True, help_text="No scheduled start after this time (blank: no end)."
    )
    runs_started = models.PositiveIntegerField(default=0, editable=False)
    # When and why the schedule stopped for good (its max runs reached, its end date passed):
    # set once, with an event, so a spent schedule does not read "enabled".
    finished_at = models.DateTimeField(null=True, blank=True, editable=False)
    finished_reason = models.CharField(max_length=100, blank=True, editable=False)
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

    def past_end(self, now=None) -> bool:
        from django.utils import timezone

        return self.ends_at is not None and (now or timezone.now()) >= self.ends_at

    def end_reason(self, now=None) -> str:
        """Why the schedule starts nothing more, or "" while it may still start runs."""
        if self.exhausted:
            return FINISHED_MAX_RUNS
        return FINISHED_END_DATE if self.past_end(now) else ""

    @property
    def status(self) -> str:
        """What the campaign page and the API say of the schedule: enabled, disabled, or finished and why."""
        if reason := self.end_reason():
            return f"finished: {reason}"
        return "enabled" if self.enabled else "disabled"

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

"""Byte budgets of a campaign: per run, and per day and per week over all its runs.

A run starts with the smallest of what is left; the driver stops it cleanly there and
says which budget it reached. Days and weeks are counted in the site's time zone, and a
run counts towards the day (and week) it was created in.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db.models import Sum
from django.utils import timezone

from campaigns.models import Campaign, Run


@dataclass(frozen=True)
class Budget:
    remaining: int
    label: str  # how the driver names it when the run stops there
    limit: int
    used: int


def period_starts(now: datetime) -> tuple[datetime, datetime]:
    """Start of the current day and ISO week (Monday) in the site's time zone."""
    local = now.astimezone(ZoneInfo(settings.TIME_ZONE))
    day = local.replace(hour=0, minute=0, second=0, microsecond=0)
    return day, day - timedelta(days=local.weekday())


def bytes_used_since(campaign: Campaign, since: datetime) -> int:
    return Run.objects.filter(campaign=campaign, created__gte=since).aggregate(total=Sum("bytes_done"))["total"] or 0


def tightest_budget(campaign: Campaign, now: datetime | None = None) -> Budget | None:
    """The byte budget a new run of `campaign` gets, or None when it has none."""
    day, week = period_starts(now or timezone.now())
    budgets: list[Budget] = []
    if campaign.max_bytes:
        budgets.append(Budget(campaign.max_bytes, "byte budget", campaign.max_bytes, 0))
    for limit, since, label in (
        (campaign.max_bytes_per_day, day, "daily byte budget"),
        (campaign.max_bytes_per_week, week, "weekly byte budget"),
    ):
        if limit:
            used = bytes_used_since(campaign, since)
            budgets.append(Budget(limit - used, label, limit, used))
    return min(budgets, key=lambda b: b.remaining, default=None)

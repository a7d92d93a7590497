"""The checks a scheduled start must pass: slip, allowed window, overlap with other runs.

Window and slip are pure functions of the schedule and the clock; overlap looks at the
runs in flight. Each returns the reason a start must not happen, or None.
"""

from __future__ import annotations

from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

from campaigns.choices import ACTIVE_RUN_STATES
from campaigns.models import Campaign, CampaignSchedule, Run, parse_weekdays
from campaigns.spec import RunSpec


def slip_reason(due_at: datetime, now: datetime, max_slip_minutes: int) -> str | None:
    late = now - due_at
    if late > timedelta(minutes=max_slip_minutes):
        minutes = late.total_seconds() / 60
        return f"started {minutes:.1f} min after its due time {due_at:%Y-%m-%d %H:%M} (max slip {max_slip_minutes} min)"
    return None


def _in_time_window(moment: time, start: time, end: time) -> bool:
    if start < end:
        return start <= moment < end
    return moment >= start or moment < end  # a window across midnight, e.g. 22:00-06:00


def window_reason(schedule: CampaignSchedule, now: datetime) -> str | None:
    local = now.astimezone(ZoneInfo(schedule.time_zone))
    if local.weekday() not in parse_weekdays(schedule.window_days):
        return f"outside the allowed days ({schedule.window_days}): it is {local:%A %H:%M} {schedule.time_zone}"
    start, end = schedule.window_start, schedule.window_end
    if start is not None and end is not None and not _in_time_window(local.time(), start, end):
        return f"outside the allowed window {start:%H:%M}-{end:%H:%M} {schedule.time_zone}: it is {local:%a %H:%M}"
    return None


def _written(direction: str, sources: list, destinations: list) -> list:
    """The endpoints a run writes to: destinations, sources when reversed, both when alternating."""
    if direction == "reverse":
        return sources
    if direction == "both":
        return [*sources, *destinations]
    return destinations


def overlap_reason(campaign: Campaign) -> str | None:
    """Why a run of `campaign` would collide with a run in flight, or None.

    Two runs writing to one endpoint or one backend measure each other, not the storage.
    """
    mine = _written(campaign.direction, list(campaign.sources.all()), list(campaign.destinations.all()))
    endpoint_ids = {ep.pk for ep in mine}
    backend_ids = {ep.backend_id for ep in mine}
    for run in Run.objects.filter(state__in=ACTIVE_RUN_STATES).only("pk", "state", "snapshot").order_by("pk"):
        snap = run.snapshot or {}
        direction = RunSpec.of(run).direction
        for ep in _written(direction, snap.get("sources", []), snap.get("destinations", [])):
            if ep.get("id") in endpoint_ids:
                return f"run #{run.pk} ({run.state}) is writing to endpoint {ep.get('name')}"
            if ep.get("backend") in backend_ids:
                return f"run #{run.pk} ({run.state}) is writing to backend {ep.get('backend_name')}"
    return None


def written_backend_ids(campaign: Campaign) -> list[int]:
    mine = _written(campaign.direction, list(campaign.sources.all()), list(campaign.destinations.all()))
    return sorted({ep.backend_id for ep in mine})

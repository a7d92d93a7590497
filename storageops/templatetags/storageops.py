from datetime import UTC, datetime

from django import template
from django.utils import timezone

from storageops import units

register = template.Library()
register.filter("bytes", units.human_bytes)
register.filter("rate", units.human_rate)
register.filter("duration", units.human_duration)


@register.filter
def bitrate(value: float | None) -> str:
    """A rate in bit/s, as sites state link and target rates ("40 Gbit/s")."""
    return "–" if value is None else units.si(value, "bit/s")


@register.filter
def percent(value: float | None) -> str:
    # A section a run's results do not have reaches a template as "" (string_if_invalid).
    return f"{100.0 * value:.1f} %" if isinstance(value, int | float) else "–"


@register.filter
def get(mapping: dict, key: str):
    return mapping.get(key) if isinstance(mapping, dict) else None


@register.filter
def tail(value: str, length: int = 60) -> str:
    """The end of a long text (a URL's file name matters more than its scheme and host)."""
    text = str(value or "")
    return text if len(text) <= length else "…" + text[-(length - 1) :]


@register.filter
def share(part: int | None, other: int | None) -> float | None:
    """part / (part + other): a success rate from the ok and failed counts; None if both are 0."""
    total = (part or 0) + (other or 0)
    return (part or 0) / total if total else None


@register.filter
def bits_of(bytes_per_second: float | None) -> float | None:
    return None if bytes_per_second is None else bytes_per_second * 8


@register.filter
def share_of(value: float | None, whole: float | None) -> float | None:
    """value / whole, None when either is missing or the whole is 0."""
    return value / whole if value is not None and whole else None


@register.filter
def in_unit(value: float | None, unit: str) -> str:
    """A figure of a run's judgement in its own unit: B/s, s or a fraction."""
    if value is None:
        return "–"
    if unit == "B/s":
        return units.human_rate(value)
    if unit == "s":
        return units.human_duration(value)
    return percent(value)


@register.simple_tag
def time_zone() -> str:
    """The zone every time on the pages is shown in (settings.TIME_ZONE), by its name: pages say
    it where they show times, and charts.js formats its axes and tooltips in it."""
    return timezone.get_current_timezone_name()


@register.filter
def iso_time(value: str | None) -> datetime | None:
    """An ISO 8601 time as the JSON documents hold them, as a datetime: `|date` after it shows it in
    the site's zone like any other time (sliced, the text would stay in the zone it was written in)."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        return None
    # The documents are written in UTC; one without an offset is read so, not as local time.
    return parsed if timezone.is_aware(parsed) else parsed.replace(tzinfo=UTC)

"""Which events disturb a run, and which minutes an analysis leaves out around them.

Lancaster's lesson: restarts and config changes muddy transfer results. A run is disturbed
when such an event of one of its hosts, backends or endpoints (or a site-wide one) falls
inside its window; events of a host apply to everything the host serves.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q, QuerySet

from campaigns.choices import ACTIVE_RUN_STATES
from campaigns.models import Run
from campaigns.results.scope import run_scope, run_window
from collectors.choices import DISTURBING_KINDS
from collectors.models import Event


def default_margin() -> timedelta:
    return timedelta(seconds=settings.STORAGEOPS_DISTURBANCE_MARGIN_SECONDS)


def scope_events(run: Run, margin: timedelta = timedelta(0), kinds: tuple | None = None) -> QuerySet[Event]:
    """The events in the run's window (widened by `margin`) that touch its scope, the run's
    own included; `kinds` narrows them (the charts draw them all)."""
    window = run_window(run)
    if window is None:
        return Event.objects.none()
    in_window = Q(time__gte=window[0] - margin, time__lte=window[1] + margin) & touching(run)
    # Without a kind filter the run's own start and end count too: they are logged a moment
    # outside its window.
    selected = in_window & Q(kind__in=kinds) if kinds is not None else in_window | Q(run_id=run.pk)
    return Event.objects.filter(selected).select_related("host").order_by("time")


def touching(run: Run) -> Q:
    """Events of the run's hosts, backends or endpoints, and site-wide ones."""
    scope = run_scope(run)
    site_wide = Q(host__isnull=True, backend_id__isnull=True, endpoint_id__isnull=True, run_id__isnull=True)
    return Q(host__in=scope.hosts) | Q(backend_id__in=scope.backends) | Q(endpoint_id__in=scope.endpoints) | site_wide


def disturbing_events(run: Run, margin: timedelta = timedelta(0)) -> QuerySet[Event]:
    """The disturbing events in the run's window (widened by `margin`) that touch its scope."""
    return scope_events(run, margin, kinds=DISTURBING_KINDS)


def refresh_disturbed(run: Run) -> bool:
    disturbed = disturbing_events(run).exists()
    if disturbed != run.disturbed:
        Run.objects.filter(pk=run.pk).update(disturbed=disturbed)
        run.disturbed = disturbed
    return disturbed


def on_event(event: Event) -> None:
    """Flag the runs an event disturbs: live ones, and ended ones whose window it falls in
    (events are often logged after the fact)."""
    if event.kind not in DISTURBING_KINDS:
        return
    candidates = Run.objects.filter(started_at__lte=event.time, disturbed=False).filter(
        Q(state__in=ACTIVE_RUN_STATES) | Q(finished_at__gte=event.time)
    )
    for run in candidates:
        refresh_disturbed(run)


def excluded_windows(run: Run, margin: timedelta | None = None) -> list[tuple[datetime, datetime]]:
    """Merged [event - margin, event + margin] intervals around the run's disturbing events."""
    margin = default_margin() if margin is None else margin
    windows: list[tuple[datetime, datetime]] = []
    for event in disturbing_events(run, margin):
        start, end = event.time - margin, event.time + margin
        if windows and start <= windows[-1][1]:
            windows[-1] = (windows[-1][0], max(windows[-1][1], end))
        else:
            windows.append((start, end))
    return windows


def disturbance_report(run: Run, margin: timedelta | None = None) -> dict:
    """What the run report shows: the events, and the figures with their minutes left out."""
    from campaigns.results.analysis import run_summary

    margin = default_margin() if margin is None else margin
    events = [
        {"time": e.time.isoformat(), "kind": e.kind, "summary": e.summary, "host": e.host.name if e.host else None,
         "id": e.pk}
        for e in disturbing_events(run)
    ]  # fmt: skip
    trimmed = run_summary(run, exclude=excluded_windows(run, margin))
    return {
        "events": events,
        "margin_seconds": margin.total_seconds(),
        "trimmed": {"total": trimmed["total"], "steps": trimmed["steps"], "left_out": trimmed.get("left_out", {})},
    }


def left_out_note(run: Run, summary: dict | None) -> dict | None:
    """What the run page's "disturbed" banner says, read from the stored report alone (so it
    holds for runs finished before it existed, and after retention deleted their rows): what
    was left out (copies, bytes, and the seconds of the run's own window: a margin reaching
    past the run's ends leaves out nothing there), and what remains, or None in `remains` when
    no copy does, `covers_run` saying whether that is because the windows cover the whole run.
    None for a run without a disturbance report."""
    from campaigns.results.analysis import active_window

    report = (summary or {}).get("disturbance")
    if not report:
        return None
    trimmed = report.get("trimmed") or {}
    left = trimmed.get("left_out") or {}
    windows = [(datetime.fromisoformat(lo), datetime.fromisoformat(hi)) for lo, hi in left.get("windows", [])]
    span = run_window(run)
    run_seconds = (span[1] - span[0]).total_seconds() if span else 0.0
    # The windows are merged (excluded_windows): what they take of the run is what is not active.
    cut = run_seconds - active_window(span[0], span[1], windows) if span else 0.0
    total = trimmed.get("total") or {}
    copies = (total.get("files_ok") or 0) + (total.get("files_failed") or 0)
    remains = None
    if copies:
        remains = {
            "transfers": copies,
            "bytes": total.get("bytes") or 0,
            "seconds": total.get("window_seconds") or 0.0,
            "throughput_bps": total.get("throughput_bps"),
            "success_rate": total.get("success_rate"),
        }
    return {
        "margin_seconds": report.get("margin_seconds"),
        "events": len(report.get("events", [])),
        "left_out": {"transfers": left.get("transfers", 0), "bytes": left.get("bytes", 0), "seconds": round(cut, 3)},
        "remains": remains,
        "covers_run": span is not None and cut >= run_seconds,
    }

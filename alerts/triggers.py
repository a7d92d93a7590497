"""What deserves an alert: a finished run that regressed against its history, a scheduled run
that did not finish every transfer, a stall, a host's collector gone silent, a door's disk full."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Exists, OuterRef
from django.utils import timezone

from alerts import delivery
from alerts.models import AlertKind, Delivery
from campaigns.models import ReadinessGrid, Run
from collectors.models import Event, Host
from storageops.templatetags.storageops import in_unit


def _link(run: Run) -> str:
    return f"{settings.STORAGEOPS_BASE_URL}{run.get_absolute_url()}"


def run_finished(run: Run) -> list:
    """The alerts a run that just ended calls for (none for a quiet, successful one)."""
    sent = []
    judgement = (run.summary or {}).get("judgement") or {}
    if judgement.get("status") == "regressed":
        ongoing = judgement.get("ongoing")
        subject = f"{run} regressed" + (f" (ongoing since run #{ongoing['since']})" if ongoing else "")
        sent += delivery.notify(
            AlertKind.REGRESSION, subject, regression_body(run, judgement), campaign=run.campaign, run=run,
            ongoing=ongoing is not None,
        )  # fmt: skip
    elif judgement.get("status") == "recovered":
        sent += delivery.notify(
            AlertKind.RECOVERED, f"{run} recovered", regression_body(run, judgement), campaign=run.campaign, run=run
        )
    if run.trigger == "schedule" and run.state in ("partial", "failed"):
        counts = f"{run.files_done} of {run.planned_files} transfers succeeded, {run.files_failed} failed"
        sent += delivery.notify(
            AlertKind.RUN_FAILED, f"Scheduled run {run} ended {run.state}",
            f"{counts}; {run.stop_reason or run.error or 'no reason given'}\n{_link(run)}",
            campaign=run.campaign, run=run,
        )  # fmt: skip
    return sent


def regression_body(run: Run, judgement: dict) -> str:
    """The headline, then each figure outside its band (or, for a recovery, the figures back in it)
    with the run's value, the band, its median and n, then the suspects with their time, then the
    link: enough to act on without opening the page."""
    lines = [judgement["headline"], ""]
    shown = [f for f in judgement.get("figures") or [] if f["status"] != "within"]
    if judgement.get("status") == "recovered":
        shown = [f for f in judgement.get("figures") or [] if f["key"] == "throughput"] or shown
    for f in shown:
        unit = f["unit"]
        lines.append(
            f"{f['label']}: {in_unit(f['value'], unit)}, band {in_unit(f['low'], unit)} – {in_unit(f['high'], unit)} "
            f"(median {in_unit(f['median'], unit)} of {f['n']} runs): {f['status']}"
            + (f", {f['why']}" if f.get("why") else "")
        )
    if judgement.get("suspects"):
        lines += ["", "Changed since the last run within its band:"]
        lines += [f"- {e['time'][:16].replace('T', ' ')} UTC {e['kind']} on {e['where']}: {e['summary']}"
                  for e in judgement["suspects"]]  # fmt: skip
    return "\n".join([*lines, "", _link(run)])


def run_stalled(run: Run, summary: str) -> list:
    return delivery.notify(
        AlertKind.STALL, f"{run} stalled", f"{summary}\n{_link(run)}", campaign=run.campaign, run=run
    )


def readiness_grid_failed(grid: ReadinessGrid) -> list:
    """A scheduled readiness grid whose checks did not all pass: each such check with its first
    failure, and the grid's link (site-wide subscriptions: a grid is about no one campaign)."""
    bad = grid.checks.select_related("endpoint", "peer").exclude(state="passed").order_by("endpoint__name")
    lines = [f"- {check}: {check.state}: {check.summary}" for check in bad]
    body = "\n".join([f"{len(lines)} of {grid.checks.count()} checks did not pass:", *lines, "",
                      f"{settings.STORAGEOPS_BASE_URL}{grid.get_absolute_url()}"])  # fmt: skip
    return delivery.notify(AlertKind.READINESS_FAILED, f"Daily {grid}: {len(lines)} checks did not pass", body)


def collectors_silent(now: datetime | None = None) -> list:
    """One alert per host whose collector went silent, until it is heard again: a door without
    its collector loses its metrics on the run pages, and its restarts go unlogged. Hosts never
    heard from (no collector deployed yet) are not alerted."""
    now = now or timezone.now()
    silent_for = timedelta(seconds=settings.STORAGEOPS_COLLECTOR_SILENT_SECONDS)
    sent = []
    told = Delivery.objects.filter(
        kind=AlertKind.COLLECTOR_SILENT, host=OuterRef("pk"), time__gte=OuterRef("last_seen")
    )
    # A silence already told (a delivery since the host was last heard) is not told again.
    for host in Host.objects.filter(last_seen__lt=now - silent_for).exclude(Exists(told)):
        minutes = (now - host.last_seen).total_seconds() / 60
        body = (
            f"No sample from the collector on {host.name} for {minutes:.0f} min (last at "
            f"{host.last_seen:%Y-%m-%d %H:%M:%S} UTC): runs on its doors lose their host metrics, and its "
            f"restarts and config changes go unlogged.\n{settings.STORAGEOPS_BASE_URL}{host.get_absolute_url()}"
        )
        sent += delivery.notify(AlertKind.COLLECTOR_SILENT, f"Collector on {host.name} silent", body, host=host)
    return sent


def disk_full(event: Event) -> list:
    """A watched data filesystem filled up (its collector's event): every copy writing to it
    fails with "no space" until room is made. Told once per event, to the site-wide
    subscriptions (a door serves many campaigns)."""
    host = event.host
    body = (
        f"{event.summary} (seen {event.time:%Y-%m-%d %H:%M:%S} UTC).\n"
        f"Copies writing to it fail with 'no space' until room is made; the event gets its end when there is.\n"
        f"{settings.STORAGEOPS_BASE_URL}{host.get_absolute_url()}"
    )
    return delivery.notify(AlertKind.DISK_FULL, f"Disk full on {host.name}", body, host=host)

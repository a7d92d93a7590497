"""Concurrency steps on FTS: link limits set per step, the previous values kept and restored.

For each (source SE, destination SE) pair of a run StorageOps pins the link to the step's
concurrency with min_active = max_active, so FTS's optimizer cannot wander off the plan. What
was configured before is read first and stored in FtsLinkLimit before anything changes, so a
restore works after a cancel, a failure or a crash of the driver. Every change is an Event.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

from django.utils import timezone

from campaigns.models import Run
from campaigns.runs.engines.fts.client import FtsClient, FtsError, parse_time, storage_element
from campaigns.runs.engines.fts.models import FtsLinkLimit
from campaigns.runs.planning import plan
from collectors.events import log_event

log = logging.getLogger(__name__)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# The fields of a link config FTS echoes and takes back on POST.
_LINK_FIELDS = ("source", "destination", "symbolicname", "min_active", "max_active", "nostreams", "optimizer_mode")


def run_links(run: Run) -> list[tuple[str, str]]:
    """The (source SE, destination SE) pairs the run's files travel over, in a stable order."""
    pairs = {(storage_element(t.source), storage_element(t.destination)) for t in plan(run.snapshot, run.pk)}
    return sorted(pairs)


def _event(run: Run, summary: str, detail: dict) -> None:
    log_event("fts_config", summary, run=run, detail=json.dumps(detail, sort_keys=True))


def apply_step(client: FtsClient, run: Run, links: list[tuple[str, str]], concurrency: int) -> None:
    """Pin every link of the run to `concurrency` active transfers."""
    existing: list[dict] | None = None
    for number, (source, dest) in enumerate(links):
        record = FtsLinkLimit.objects.filter(run=run, source_se=source, dest_se=dest).first()
        if record is None:
            if existing is None:
                existing = client.links()
            previous = next((c for c in existing if c.get("source") == source and c.get("destination") == dest), None)
            name = previous["symbolicname"] if previous else f"storageops-run{run.pk}-{number}"
            # Stored before the change: if the POST succeeds and we then die, the restore still knows.
            record = FtsLinkLimit.objects.create(
                run=run,
                symbolicname=name,
                source_se=source,
                dest_se=dest,
                previous={k: previous.get(k) for k in _LINK_FIELDS} if previous else None,
                changed_at=timezone.now(),
            )
        config = {
            "source": source,
            "destination": dest,
            "symbolicname": record.symbolicname,
            "min_active": concurrency,
            "max_active": concurrency,
        }
        applied = client.set_link(config)
        record.applied = {k: applied.get(k, config.get(k)) for k in _LINK_FIELDS}
        record.changed_at = timezone.now()
        record.save(update_fields=["applied", "changed_at"])
        _event(
            run,
            f"FTS link {source} → {dest} pinned to {concurrency} active (was "
            + (f"{record.previous['min_active']}–{record.previous['max_active']}" if record.previous else "unset")
            + ")",
            {"link": record.symbolicname, "set": record.applied, "previous": record.previous},
        )


def in_force(client: FtsClient, run: Run, links: list[tuple[str, str]], concurrency: int) -> bool | None:
    """Whether FTS's scheduler obeys `concurrency` on every link now; None: FTS does not say.

    A range set with POST /config/links is not what FTS's scheduler reads: it reads the
    optimizer's value for the link, which the optimizer sets from the range at its next pass
    (every 60 s by default), and which a link without one yet does not have at all (then the
    scheduler starts up to 10 files per pass). Each decision is a row of GET /optimizer/evolution
    and the value in force is the newest one: when that is `concurrency` for every link, it is in
    force and stays so, since the range is fixed there. No clock is compared with FTS's.
    """
    for source, dest in links:
        evolution = client.optimizer_evolution(source, dest)
        if evolution is None:
            return None
        # Newest first as FTS lists them; max() keeps the first of equal times.
        newest = max(evolution, key=lambda e: parse_time(e.get("datetime")) or _EPOCH, default=None)
        if newest is None or newest.get("active") != concurrency:
            return False
    _event(
        run,
        f"FTS optimizer put {concurrency} active in force on {len(links)} link(s)",
        {"links": [f"{s} {d}" for s, d in links], "active": concurrency},
    )
    return True


def restore(client: FtsClient, run: Run) -> list[str]:
    """Put every link the run changed back as it was; returns the errors (also kept and logged)."""
    errors = []
    for record in FtsLinkLimit.objects.filter(run=run, restored_at__isnull=True):
        try:
            if record.previous is None:
                client.delete_link(record.symbolicname)
                summary = f"FTS link {record.source_se} → {record.dest_se}: StorageOps' config removed"
            else:
                client.set_link({k: v for k, v in record.previous.items() if v is not None})
                summary = (
                    f"FTS link {record.source_se} → {record.dest_se} restored to "
                    f"{record.previous['min_active']}–{record.previous['max_active']} active"
                )
        except FtsError as exc:
            record.restore_error = str(exc)
            record.save(update_fields=["restore_error"])
            errors.append(f"{record.symbolicname}: {exc}")
            _event(run, f"FTS link {record.symbolicname} could NOT be restored: {exc}"[:300], {"error": str(exc)})
            continue
        record.restored_at = timezone.now()
        record.restore_error = ""
        record.save(update_fields=["restored_at", "restore_error"])
        _event(run, summary, {"link": record.symbolicname, "restored": record.previous})
    return errors


def _within(entry_time: datetime | None, start: datetime, end: datetime) -> bool:
    return entry_time is not None and start <= entry_time <= end


def read_fts_side(client: FtsClient, run: Run, links: list[tuple[str, str]], start: datetime, end: datetime) -> dict:
    """FTS's own record of the run window: config audit entries become Events (changes made
    by anyone, StorageOps included), optimizer decisions are kept as a series per link."""
    report: dict = {"audit": "unsupported", "optimizer": {}}
    # FTS prints times to the second: the window starts at the second the run started.
    start = start.replace(microsecond=0)
    try:
        audit = client.audit()
    except FtsError as exc:
        audit, report["audit"] = None, f"error: {exc}"
    if audit is not None:
        entries = [a for a in audit if _within(parse_time(a.get("datetime")), start, end)]
        for entry in entries:
            log_event(
                "fts_config",
                f"FTS audit: {entry.get('action', '?')} by {entry.get('dn', '?')}",
                time=parse_time(entry["datetime"]),
                run=run,
                who=(entry.get("dn") or "")[:150],
                detail=str(entry.get("config", "")),
            )
        report["audit"] = len(entries)
    for source, dest in links:
        try:
            evolution = client.optimizer_evolution(source, dest)
        except FtsError as exc:
            report["optimizer"][f"{source} {dest}"] = f"error: {exc}"
            continue
        if evolution is None:
            report["optimizer"][f"{source} {dest}"] = "unsupported"
            continue
        series = [
            {k: e.get(k) for k in ("datetime", "active", "throughput", "success", "ema", "rationale", "actual_active")}
            for e in evolution
            if _within(parse_time(e.get("datetime")), start, end)
        ]
        report["optimizer"][f"{source} {dest}"] = sorted(series, key=lambda e: e["datetime"])
    return report

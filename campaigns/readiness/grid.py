"""The readiness grid: every endpoint checked on its own and every pair that shares a third-party
copy mode checked both ways, all at once (the WLCG DOMA TPC smoke test's matrix); a cell per
endpoint or ordered pair and per kind of step; and its optional daily run.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import time
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import transaction

from campaigns.models import Endpoint, ReadinessCheck, ReadinessGrid
from campaigns.readiness import start, tpc_modes

# "refused": writes with a wrong token (read-only, another path) the door must refuse.
COLUMNS = ("upload", "stat", "checksum", "download", "tpc", "delete", "refused")
DAILY_TASK_NAME = "StorageOps: daily readiness grid"
DAILY_TASK = "campaigns.readiness_grid"
# A cell shows the worst of its steps' states.
_WORST_FIRST = ("failed", "cancelled", "running", "pending", "skipped", "passed")


def grid_endpoints() -> list[Endpoint]:
    """Every endpoint with storage behind it (mock:// ones simulate copies), by name."""
    return [ep for ep in Endpoint.objects.order_by("name") if ep.protocol != "mock"]


def start_grid(*, user=None, trigger: str = ReadinessGrid.Trigger.MANUAL) -> ReadinessGrid:
    """Queue a check for every endpoint, and one for every pair whose schemes share a
    third-party copy mode (one check copies both ways): the workers take them side by side."""
    endpoints = grid_endpoints()
    with transaction.atomic():
        grid = ReadinessGrid(trigger=trigger, requested_by=user if user and user.is_authenticated else None)
        grid.save()
        for endpoint in endpoints:
            start(endpoint, user=user, grid=grid)
        for a, b in itertools.combinations(endpoints, 2):
            if tpc_modes(a.protocol, b.protocol):
                start(a, b, user=user, grid=grid)
    return grid


@dataclass
class Cell:
    state: str  # the worst of its steps', "" where no step of the kind ran
    text: str
    check: ReadinessCheck | None
    detail: str  # each step's title and message, for the cell's tooltip


@dataclass
class Row:
    label: str
    cells: list[Cell]


def rows(grid: ReadinessGrid) -> list[Row]:
    """One row per endpoint (its own steps), then one per ordered pair (its copies and their
    deletes), each with a cell per column of COLUMNS."""
    checks = list(grid.checks.select_related("endpoint", "peer").order_by("endpoint__name", "peer__name"))
    solo = [c for c in checks if c.peer_id is None]
    pairs = [c for c in checks if c.peer_id is not None]
    out = [Row(c.endpoint.name, [_cell(c, _own(c, column)) for column in COLUMNS]) for c in solo]
    for check in pairs:
        for src, dst in ((check.endpoint, check.peer), (check.peer, check.endpoint)):
            copies = [s for s in check.steps if s["operation"] == "tpc" and s["key"].split(":", 1)[1].startswith(
                f"{src.name}>{dst.name}")]  # fmt: skip
            written = {s["destination"] for s in copies}
            deletes = [s for s in check.steps if s["operation"] == "delete" and s["destination"] in written]
            cells = [Cell("", "", check, "") for _ in COLUMNS]
            cells[COLUMNS.index("tpc")] = _cell(check, copies)
            cells[COLUMNS.index("delete")] = _cell(check, deletes)
            out.append(Row(f"{src.name} → {dst.name}", cells))
    return out


def _own(check: ReadinessCheck, column: str) -> list[dict]:
    return [s for s in check.steps if s["operation"] == column]


def _cell(check: ReadinessCheck, steps: list[dict]) -> Cell:
    if not steps:
        # A check no worker took yet has no steps: its cells say so.
        state = check.state if check.state in ("queued", "cancelled") else ""
        return Cell(state, {"queued": "queued", "cancelled": "cancelled"}.get(state, ""), check, "")
    states = [s["state"] for s in steps]
    worst = next(s for s in _WORST_FIRST if s in states)
    count = f" ({states.count(worst)} of {len(states)})" if len(states) > 1 and worst != "passed" else ""
    detail = "\n".join(f"{s['title']}: {s['state']} {s['message']}".strip() for s in steps)
    return Cell(worst, worst + count, check, detail)


# -- the daily schedule: one django-celery-beat PeriodicTask --------------------------------------
def daily_schedule() -> time | None:
    """The time of day (UTC) the grid runs by itself, or None."""
    from django_celery_beat.models import PeriodicTask

    task = PeriodicTask.objects.filter(name=DAILY_TASK_NAME, enabled=True).select_related("crontab").first()
    if task is None or task.crontab is None:
        return None
    return time(int(task.crontab.hour), int(task.crontab.minute))


def set_daily_schedule(at: time | None) -> None:
    """Run the grid every day at `at` (UTC), or never (None). Its failures go to the alerts."""
    from django_celery_beat.models import CrontabSchedule, PeriodicTask

    if at is None:
        for task in PeriodicTask.objects.filter(name=DAILY_TASK_NAME):
            task.enabled = False
            task.save()  # its signals tell a running beat
        return
    crontab, _ = CrontabSchedule.objects.get_or_create(
        minute=str(at.minute), hour=str(at.hour), day_of_month="*", month_of_year="*", day_of_week="*",
        timezone=ZoneInfo("UTC"),
    )  # fmt: skip
    task = PeriodicTask.objects.filter(name=DAILY_TASK_NAME).first() or PeriodicTask(name=DAILY_TASK_NAME)
    task.task, task.crontab, task.interval, task.enabled = DAILY_TASK, crontab, None, True
    task.queue = settings.STORAGEOPS_CONTROL_QUEUE
    task.description = "Runs the readiness grid; set it on the readiness grid page."
    task.save()

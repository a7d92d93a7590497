"""Streamed exports of a run's transfers and of comparisons: rows are read in chunks and
written as they come, so a 500,000-transfer run never sits in memory."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator

from campaigns.models import Run, Transfer, transfer_extras
from campaigns.results import concurrency, readers, refill_gap
from campaigns.spec import RunSpec

_COMMON_COLUMNS = (
    "index", "step", "state", "attempt", "source", "destination", "size", "started_at", "finished_at", "duration",
    "bytes_transferred", "throughput_bps", "error_category", "error_code", "error_message", "copy_mode",
    "source_checksum", "destination_checksum", "transfer_host",
)  # fmt: skip
# Appended, never inserted: readers pick the earlier columns by position.
_LATER_COLUMNS = ("complete_on_destination",)
_CHUNK = 5000


def transfer_columns() -> tuple[str, ...]:
    """The export's columns: Transfer's own, then what the engines record of a transfer in
    tables of their own (campaigns.models.transfer_extras: FTS's fts_job_id and fts_file_id,
    where they always were), then the columns added since."""
    extras = tuple(column.name for column in transfer_extras.columns())
    return (*_COMMON_COLUMNS, *extras, *_LATER_COLUMNS)


def _rows(run: Run) -> Iterator[tuple]:
    # The engines' columns come in the same query, each through its one-to-one (a LEFT JOIN).
    extras = transfer_extras.columns()
    lookups = (*_COMMON_COLUMNS, *(column.lookup for column in extras), *_LATER_COLUMNS)
    first, last = len(_COMMON_COLUMNS), len(_COMMON_COLUMNS) + len(extras)
    rows = Transfer.objects.filter(run=run).order_by("index").values_list(*lookups).iterator(chunk_size=_CHUNK)
    for row in rows:
        shown = tuple(column.shown(value) for column, value in zip(extras, row[first:last], strict=True))
        yield (*row[:first], *shown, *row[last:])


def _text(value) -> object:
    return value.isoformat() if hasattr(value, "isoformat") else value


def transfers_csv(run: Run) -> Iterator[str]:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(transfer_columns())
    for n, row in enumerate(_rows(run), 1):
        writer.writerow([_text(v) for v in row])
        if n % 1000 == 0:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()


def transfers_json(run: Run) -> Iterator[str]:
    """The run's step table (as steps_csv has it), then a JSON array of objects, one per
    transfer, written a line at a time."""
    columns = _step_columns(run)
    steps = [dict(zip(columns, _step_values(columns, step), strict=True)) for step in readers.steps(run)]
    yield f'{{"run": {run.pk}, "steps": {json.dumps(steps)}, "transfers": [\n'
    first = True
    names = transfer_columns()
    for row in _rows(run):
        item = json.dumps({k: _text(v) for k, v in zip(names, row, strict=True)})
        yield ("" if first else ",\n") + item
        first = False
    yield "\n]}\n"


ACHIEVED_COLUMNS = ("achieved_mean", "achieved_max", "off_target")
# A step measured after its warm-up (FTS): how long the warm-up was, and where its window starts.
MEASURED_COLUMNS = ("warmup_seconds", "measured_from")
# A step's refill gap (campaigns.results.refill_gap): its slots' mean idle time between a
# copy's end and the next start, and how many refills that is the mean of.
GAP_COLUMNS = ("gap_seconds", "gaps")


def _step_columns(run: Run) -> tuple[str, ...]:
    # A sweep's swept knobs follow the concurrency: each row is its step's full point. Last, what
    # the step achieved (concurrency.achieved: copies in flight, mean and max, off target), added
    # at the end so that the columns a reader already picks by position stay where they were; the
    # warm-up after them, for the same reason, and the scheduling gap after that.
    axes = tuple(RunSpec.of(run).swept_axes)
    return ("step", "concurrency", *axes, "files_ok", "files_failed", "bytes", "window_seconds",
            "throughput_bps", "success_rate", "duration_p50", "duration_p95", *ACHIEVED_COLUMNS,
            *MEASURED_COLUMNS, *GAP_COLUMNS)  # fmt: skip


def _step_values(columns: tuple[str, ...], step: dict) -> list:
    read = {
        **dict(zip(ACHIEVED_COLUMNS, concurrency.achieved(step), strict=True)),
        **dict(zip(GAP_COLUMNS, refill_gap.gap(step), strict=True)),
    }
    return [read[c] if c in read else step.get(c) for c in columns]


def steps_csv(run: Run) -> Iterator[str]:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    columns = _step_columns(run)
    writer.writerow(columns)
    for step in readers.steps(run):
        writer.writerow(_step_values(columns, step))
    yield buffer.getvalue()

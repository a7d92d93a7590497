"""Figures of a run: per step, per endpoint and per door, the way the sites' papers report them.

Throughput is always bytes really moved divided by time really spent: a step's figure is
the bytes of its successful copies over its active window (first start to last end), not
a mean of per-file rates, which would overstate what the storage sustained. A step with a
measurement start (FTS's warm-up, RunStep.measured_from) is measured from there instead
(campaigns.results.measured).

A cancelled run's figures stop at the cancel (Run.cancel_requested_at): copies still running
then die or drain at no concurrency anyone asked for, so a window that runs past the cancel
ends there, and its throughput is the bytes moved before it (each copy's spread evenly over its
duration) over that window. The counts and `bytes` stay what the copies did.

The success rate counts every copy that started: ok over ok, failed and cancelled (a copy a
cancel stopped did not succeed); a skipped file never started and is not counted.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict, deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import urlsplit

from django.db import connection

from campaigns.choices import TransferState
from campaigns.models import Endpoint, Run, Transfer
from campaigns.results import concurrency, measured, refill_gap, step_points
from campaigns.spec import RunSpec

_FIELDS = (
    "step",
    "state",
    "size",
    "bytes_transferred",
    "started_at",
    "finished_at",
    "duration",
    "error_category",
    "source_endpoint_id",
    "destination_endpoint_id",
    "transfer_host",
    "copy_mode",
)


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile of sorted `values` (q in 0..100)."""
    if not values:
        return None
    rank = max(1, math.ceil(q / 100.0 * len(values)))
    return values[rank - 1]


@dataclass
class Aggregate:
    ok: int = 0
    failed: int = 0
    cancelled: int = 0
    skipped: int = 0
    bytes: int = 0
    # Epoch seconds, as the rows are read (a float holds a microsecond exactly at these
    # magnitudes, and parsing 100,000 timestamps took half of a large run's summary).
    first: float | None = None
    last: float | None = None
    durations: list[float] = field(default_factory=list)
    # Every finished attempt's duration, failures included: a request that timed out after
    # 30 s is latency a client saw, and a checksum load is judged by it.
    latencies: list[float] = field(default_factory=list)
    errors: Counter = field(default_factory=Counter)
    # Intervals left out of the analysis (around restarts): not counted as active time.
    excluded: list[tuple[datetime, datetime]] = field(default_factory=list)
    # A step measured after its warm-up: where its window starts (epoch seconds) and the bytes
    # its copies moved from there on.
    measured_since: float | None = None
    measured_until: float | None = None  # its drain start; None: to its last end
    measured_moved: float = 0.0
    # A cancelled run: when its cancel was asked for (epoch seconds), and the bytes moved before.
    stop_at: float | None = None
    moved_before_stop: float = 0.0

    @property
    def first_start(self) -> datetime | None:
        return _datetime(self.first)

    @property
    def last_end(self) -> datetime | None:
        return _datetime(self.last)

    def add(self, state, size, moved, started: float | None, finished: float | None, duration, category) -> None:
        """One row, its start and end in epoch seconds."""
        if state == TransferState.SUCCEEDED:
            self.ok += 1
            self.bytes += moved or 0
            if duration is not None:
                self.durations.append(duration)
        elif state == TransferState.FAILED:
            self.failed += 1
            self.errors[category or "other"] += 1
        elif state == TransferState.CANCELLED:
            self.cancelled += 1
        else:
            self.skipped += 1
        if duration is not None and state in (TransferState.SUCCEEDED, TransferState.FAILED):
            self.latencies.append(duration)
        if started is not None and state in (TransferState.SUCCEEDED, TransferState.FAILED):
            if self.first is None or started < self.first:
                self.first = started
            if finished is not None and (self.last is None or finished > self.last):
                self.last = finished
        if self.measured_since is not None and state == TransferState.SUCCEEDED and started and finished:
            self.measured_moved += measured.bytes_within(
                moved or 0, started, finished, self.measured_since, self.measured_until
            )
        if self.stop_at is not None and state == TransferState.SUCCEEDED and started and finished:
            self.moved_before_stop += measured.bytes_within(moved or 0, started, finished, started, self.stop_at)

    def as_dict(self) -> dict:
        self.durations.sort()
        self.latencies.sort()
        out = {
            **figures(self.ok, self.failed, self.bytes, self.first_start, self.last_end, self.excluded, self.cancelled),
            "files_skipped": self.skipped,
            # Bytes per second of copy time: what its copies moved while they ran, however the
            # run's slots were shared. A backend's throughput over its own window is paced by the
            # others' copies in a run over several (a slow EOS stretches dCache's window too).
            "copy_rate_bps": self.bytes / busy if (busy := sum(self.durations)) > 0 else None,
            "duration_p50": percentile(self.durations, 50),
            "duration_p95": percentile(self.durations, 95),
            "latency_p50": percentile(self.latencies, 50),
            "latency_p95": percentile(self.latencies, 95),
            "errors": dict(self.errors.most_common()),
            "start": self.first_start.isoformat() if self.first_start else None,
            "end": self.last_end.isoformat() if self.last_end else None,
        }
        if self.measured_since is not None:
            since = datetime.fromtimestamp(self.measured_since, tz=UTC)
            end = self.last_end
            if self.measured_until is not None:
                end = datetime.fromtimestamp(self.measured_until, tz=UTC)
            after = end is not None and end > since
            window = active_window(since, end, self.excluded) if after else 0.0
            measured.apply(out, self.measured_since, self.measured_moved, window)
            if self.stop_at is not None and self.measured_until == self.stop_at:  # the cancel ended its window
                out["until_cancel"] = datetime.fromtimestamp(self.stop_at, tz=UTC).isoformat()
        elif self.stop_at is not None and self.first is not None and self.last is not None and self.last > self.stop_at:
            window = active_window(self.first_start, _datetime(max(self.stop_at, self.first)), self.excluded)
            stopped(out, self.stop_at, self.moved_before_stop, window)
        return out


def stopped(row: dict, at: float, moved: float, window_seconds: float) -> dict:
    """Give a figure row whose window ran past the run's cancel at `at` (epoch seconds) the
    figures of its window up to there: the `moved` bytes before it over `window_seconds`."""
    row["until_cancel"] = datetime.fromtimestamp(at, tz=UTC).isoformat()
    row["bytes_before_cancel"] = round(moved)
    row["window_seconds"] = round(window_seconds, 3)
    row["throughput_bps"] = moved / window_seconds if window_seconds > 0 else None
    return row


def active_window(
    first: datetime | None, last: datetime | None, excluded: Iterable[tuple[datetime, datetime]] = ()
) -> float:
    """Seconds from the first start to the last end, less the excluded intervals inside."""
    if first is None or last is None:
        return 0.0
    cut = sum(_overlap(first, last, lo, hi) for lo, hi in excluded)
    return max((last - first).total_seconds() - cut, 0.0)


def figures(
    ok: int,
    failed: int,
    moved: int | None,
    first: datetime | None,
    last: datetime | None,
    excluded: Iterable[tuple[datetime, datetime]] = (),
    cancelled: int = 0,
) -> dict:
    """Counts, bytes, active window, throughput and success rate of a set of copies.

    The one throughput formula: the bytes of the successful copies over their active window.
    The success rate: ok over every copy that started (ok, failed, and cancelled while it ran).
    Every table (run summary, live steps, trimmed comparisons) builds its rows with this.
    """
    window = active_window(first, last, excluded)
    attempted = ok + failed + cancelled
    return {
        "files_ok": ok,
        "files_failed": failed,
        "files_cancelled": cancelled,
        "bytes": moved or 0,
        "window_seconds": round(window, 3),
        "throughput_bps": (moved or 0) / window if window > 0 else None,
        "success_rate": ok / attempted if attempted else None,
    }


def _overlap(start: datetime, end: datetime, lo: datetime, hi: datetime) -> float:
    return max((min(end, hi) - max(start, lo)).total_seconds(), 0.0)


def _rows(run: Run) -> Iterator[tuple]:
    """The rows as _FIELDS, their start and end as epoch seconds (PostgreSQL's date_part is
    the exact microsecond value rounded once, as datetime.timestamp() is). A plain server-side
    cursor: Django's per-value converters took a third of a 100,000-row summary."""
    columns = ", ".join(f"date_part('epoch', {name})" if name.endswith("_at") else name for name in _FIELDS)
    sql = f"SELECT {columns} FROM {Transfer._meta.db_table} WHERE run_id = %s"  # noqa: S608 -- names of ours
    with connection.chunked_cursor() as cursor:
        cursor.execute(sql, [run.pk])
        while chunk := cursor.fetchmany(20000):
            yield from chunk


def _datetime(epoch: float | None) -> datetime | None:
    # fromtimestamp rounds to the microsecond: the value the row holds, exactly.
    return None if epoch is None else datetime.fromtimestamp(epoch, tz=UTC)


def modes_used(counts: Counter) -> str:
    """What a step's copies reported, for its table: the mode alone when they agree, else each
    with its count, most used first ("3rd pull 12, streamed 2"); empty when none said."""
    if len(counts) == 1:
        return next(iter(counts))
    return ", ".join(f"{mode} {n}" for mode, n in counts.most_common())


def step_modes(points: dict[int, dict], spec: RunSpec, index: int, counts: Counter) -> dict:
    """A step's copy mode as asked (its point's, a sweep may change it) beside the ones used."""
    return {
        "mode_asked": step_points.mode_asked(points, spec, index),
        "copy_modes": dict(counts.most_common()),
        "mode_used": modes_used(counts),
    }


def door_names(endpoint_ids: Iterable[int]) -> dict[int, str]:
    """A door is a host serving the endpoint; without registered hosts, the URL's host:port."""
    names: dict[int, str] = {}
    for ep in Endpoint.objects.filter(pk__in=set(endpoint_ids)).prefetch_related("hosts"):
        hosts = sorted(h.name for h in ep.hosts.all())
        names[ep.pk] = ",".join(hosts) if hosts else (urlsplit(ep.url).netloc or ep.name)
    return names


def run_summary(run: Run, exclude: list[tuple[datetime, datetime]] | None = None) -> dict:
    """The totals, the step table, and the per-endpoint and per-door figures of a run.

    With `exclude`, copies that overlap one of those intervals are left out, and so is the
    time of the intervals themselves; the result says how much was left out.
    """
    exclude = exclude or []
    cut = [(lo.timestamp(), hi.timestamp()) for lo, hi in exclude]
    stop = concurrency.cancel_at(run)

    def new() -> Aggregate:
        return Aggregate(excluded=exclude, stop_at=stop)

    total = new()
    windows = concurrency.measured_windows(run)
    steps: dict[int, Aggregate] = {}
    by_destination: dict[int, Aggregate] = defaultdict(new)
    by_source: dict[int, Aggregate] = defaultdict(new)
    left_out = {"transfers": 0, "bytes": 0}
    # The copies' times per step, for the achieved concurrency: read in this pass, not another.
    intervals: concurrency.Intervals = defaultdict(list)
    copies: dict[int, list[refill_gap.Copy]] = defaultdict(list)  # the same with durations (the gap's)
    spec = RunSpec.of(run)
    recorded = step_points.step_points(run, spec)
    by_client: dict[str, Aggregate] | None = defaultdict(new) if spec.clients else None
    # The mode gfal2 (or FTS) reported per copy: a step asked one, and its copies may not all agree.
    modes_of: dict[int, Counter] = defaultdict(Counter)
    for step, state, size, moved, started, finished, duration, category, src, dst, host, mode in _rows(run):
        if concurrency.ran(state, step, started, finished):
            intervals[step].append((started, finished))
            copies[step].append((started, finished, duration))
        if cut and started and finished and any(started <= hi and finished >= lo for lo, hi in cut):
            left_out["transfers"] += 1
            left_out["bytes"] += moved or 0
            continue
        values = (state, size, moved, started, finished, duration, category)
        total.add(*values)
        if step is not None:
            if step not in steps:
                window = windows.get(step)
                steps[step] = Aggregate(
                    excluded=exclude,
                    measured_since=window.since if window else None,
                    measured_until=window.until if window else None,
                    stop_at=stop,
                )
            steps[step].add(*values)
            if mode:
                modes_of[step][mode] += 1
        by_destination[dst].add(*values)
        by_source[src].add(*values)
        if by_client is not None:
            by_client[host].add(*values)
    endpoint_names = dict(Endpoint.objects.filter(pk__in={*by_source, *by_destination}).values_list("pk", "name"))
    doors = door_names({*by_source, *by_destination})
    working_side = by_source if spec.door_side == "source" else by_destination
    per_door: dict[str, Aggregate] = defaultdict(new)
    for endpoint_id, agg in working_side.items():
        door = per_door[doors.get(endpoint_id, str(endpoint_id))]
        _merge(door, agg)
    backend_of = {ep.get("id"): ep.get("backend_name") for ep in run.snapshot.get(f"{spec.door_side}s", [])}
    per_backend: dict[str, Aggregate] = defaultdict(new)
    for endpoint_id, agg in working_side.items():
        if backend_of.get(endpoint_id):
            _merge(per_backend[backend_of[endpoint_id]], agg)
    summary = {
        "total": total.as_dict(),
        "steps": concurrency.with_achieved(
            run,
            [
                {
                    "step": index,
                    **step_points.columns(recorded, spec, index),
                    **steps[index].as_dict(),
                    **step_modes(recorded, spec, index, modes_of[index]),
                    # Its slots' idle time between a copy's end and the next start (FTS's pass).
                    **refill_gap.figures(copies.get(index, ()), _since(windows, index)),
                }
                for index in sorted(steps)
            ],
            intervals,
            windows=windows,
        ),
        "destinations": {endpoint_names.get(k, str(k)): v.as_dict() for k, v in by_destination.items()},
        "sources": {endpoint_names.get(k, str(k)): v.as_dict() for k, v in by_source.items()},
        "doors": {name: agg.as_dict() for name, agg in sorted(per_door.items())},
        # The working side's backends (the destinations' for a write, the sources' for a read):
        # a campaign that writes to dCache and EOS at once is judged on each (baselines).
        "backends": {name: agg.as_dict() for name, agg in sorted(per_backend.items())},
        "door_side": spec.door_side,
    }
    if by_client is not None:
        summary["clients"] = client_figures(spec, by_client, total)
    if exclude:
        summary["left_out"] = {
            **left_out,
            "seconds": sum((hi - lo).total_seconds() for lo, hi in exclude),
            "windows": [[lo.isoformat(), hi.isoformat()] for lo, hi in exclude],
        }
    return summary


def _since(windows: dict, index: int) -> float | None:
    window = windows.get(index)
    return window.since if window is not None else None


def client_figures(spec: RunSpec, by_client: dict[str, Aggregate], total: Aggregate) -> dict[str, dict]:
    """Each client's copies (those it ended; a transfer no client ended, under ""), with its part
    of the run's throughput: its bytes over the run's active window, so the parts add up to the
    run's figure (its own window's rate, throughput_bps, does not: a client lost early has a short one)."""
    window = active_window(total.first_start, total.last_end, total.excluded)
    figures_of = {}
    for name in [*(c.name for c in spec.clients), *sorted(set(by_client) - {c.name for c in spec.clients})]:
        agg = by_client.get(name) or Aggregate(excluded=total.excluded)
        figures_of[name] = {**agg.as_dict(), "share_bps": agg.bytes / window if window > 0 else None}
    return figures_of


def _merge(into: Aggregate, other: Aggregate) -> None:
    into.ok += other.ok
    into.failed += other.failed
    into.cancelled += other.cancelled
    into.skipped += other.skipped
    into.bytes += other.bytes
    into.moved_before_stop += other.moved_before_stop
    into.durations.extend(other.durations)
    into.latencies.extend(other.latencies)
    into.errors.update(other.errors)
    for attr, pick in (("first", min), ("last", max)):
        values = [v for v in (getattr(into, attr), getattr(other, attr)) if v is not None]
        setattr(into, attr, pick(values) if values else None)


def throughput_series(run: Run, bucket_seconds: int = 10) -> list[dict]:
    """Bytes/s in fixed buckets, each copy's bytes spread evenly over its own duration."""
    buckets: dict[int, float] = defaultdict(float)
    origin = None
    rows = (
        Transfer.objects.filter(run=run, state=TransferState.SUCCEEDED)
        .values_list("started_at", "finished_at", "bytes_transferred")
        .order_by()
        .iterator(chunk_size=20000)
    )
    for started, finished, moved in rows:
        if started is None or finished is None or not moved:
            continue
        start, end = started.timestamp(), finished.timestamp()
        origin = start if origin is None else min(origin, start)
        span = max(end - start, 1e-9)
        rate = moved / span
        first, last = int(start // bucket_seconds), int(end // bucket_seconds)
        for b in range(first, last + 1):
            lo, hi = max(start, b * bucket_seconds), min(end, (b + 1) * bucket_seconds)
            if hi > lo or span <= 1e-9:
                buckets[b] += rate * (hi - lo) if span > 1e-9 else moved
    return [
        {"time": datetime.fromtimestamp(b * bucket_seconds).astimezone().isoformat(), "bps": v / bucket_seconds}
        for b, v in sorted(buckets.items())
    ]


def rolling_mean(values: Iterable[float], n: int) -> list[float]:
    """Each value averaged with the up to n - 1 values before it: over a series of time
    buckets (the timeline's), a mean over n buckets, not over a number of transfers."""
    window: deque[float] = deque()
    total = 0.0
    out = []
    for v in values:
        window.append(v)
        total += v
        if len(window) > n:
            total -= window.popleft()
        out.append(total / len(window))
    return out


def client_rows(summary: dict) -> list[dict]:
    """The clients table of a pooled run: each client's copies beside what its worker used
    (CPU seconds; bytes in and out through its interfaces, loopback left out) and whether it
    was lost."""
    pool = summary.get("client_pool") or {}
    rows = []
    for name, figures_of_client in (summary.get("clients") or {}).items():
        used = pool.get(name, {})
        nic = used.get("nic")
        rows.append(
            {
                "name": name or "(none)",
                **figures_of_client,
                "cpu_seconds": used.get("cpu_seconds"),
                "nic_bytes": sum(rx + tx for rx, tx in nic.values()) if nic is not None else None,
                "lost": used.get("lost", ""),
                "weight": used.get("weight"),
            }
        )
    return rows

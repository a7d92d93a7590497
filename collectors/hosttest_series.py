"""Host-test series: one fio or dd test repeated N times on a host, each result a row.

FZU measured remote Ceph RBD with dd, 50,000 times 1 GB, and read a rolling mean over 50 results;
it also saw reads at 4,799 MB/s where the device gives 662: the page cache answered, because the
test read back the file it had just written. A series therefore reads *cold* by default (after
the write is on disk, the file's pages are dropped with posix_fadvise(DONTNEED), which any user
may do for a file they can open) and can add an O_DIRECT reference read each repeat. Just before
each timed read, the file's page-cache residency is measured (mincore, as fincore does:
collectors.pagecache). A read is flagged *cached* only when its pages were resident, the
resident fraction kept as the evidence; a read that was not resident yet ran more than twice as
fast as the series' direct reads is flagged *faster than direct I/O* instead: readahead or the
hypervisor's cache answered, which a drop of the guest's page cache cannot reach.

Every parameter is validated by collectors.hosttests (whitelisted, argument lists, files only
inside STORAGEOPS_HOST_TEST_DIR); the series runs on the host's own collector queue, writes each
result as it goes, checks for a cancel between repeats and never writes more than its budget.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils import timezone

from collectors import hosttests, pagecache
from collectors.models import Host, HostTestResult, HostTestSeries

FASTER_FACTOR = 2.0  # a read this many times faster than the direct reads did not measure the device
# A read is cached from this share of its pages resident on: a tenth of the file from memory
# shortens a read by about a tenth, as much as repeats on one disk differ from each other.
CACHED_RESIDENT = 0.1
MAX_REPEATS = 100_000
ROLLING_DEFAULT = 50
_SERIES_KEYS = {"repeats", "byte_budget", "cold", "reference", "rolling"}


@dataclass(frozen=True)
class SeriesParams:
    test: hosttests.HostTestParams
    repeats: int
    byte_budget: int
    cold: bool  # read files not just written: their pages dropped first
    reference: bool  # also an O_DIRECT read each repeat (dd), the device's own figure
    rolling: int

    @property
    def bytes_per_repeat(self) -> int:
        return self.test.size * (self.test.numjobs if self.test.tool == "fio" else 1)

    @property
    def bytes_needed(self) -> int:
        return self.repeats * self.bytes_per_repeat


def max_budget() -> int:
    return int(getattr(settings, "STORAGEOPS_HOST_TEST_MAX_BYTES", 100 * 10**12))


def validate(params: dict) -> SeriesParams:
    """The only way from a request to a series; ValidationError on anything odd."""
    if not isinstance(params, dict):
        raise ValidationError("Host test parameters must be an object.")
    test_params = {k: v for k, v in params.items() if k not in _SERIES_KEYS}
    if test_params.get("tool") == "dd":
        # A dd series writes each file and then reads it back: left unsaid, what it measures is
        # the read (a warm-read series at a single test's default, rw=write, read nothing).
        test_params.setdefault("rw", "read")
    test = hosttests.validate_params(test_params)
    repeats = params.get("repeats", 1)
    if type(repeats) is not int or not 1 <= repeats <= MAX_REPEATS:
        raise ValidationError(f"repeats must be an integer between 1 and {MAX_REPEATS}, not {repeats!r}.")
    rolling = params.get("rolling", ROLLING_DEFAULT)
    if type(rolling) is not int or not 1 <= rolling <= 10_000:
        raise ValidationError(f"rolling must be an integer between 1 and 10000, not {rolling!r}.")
    flags = {}
    for key, default in (("cold", True), ("reference", False)):
        flags[key] = params.get(key, default)
        if not isinstance(flags[key], bool):
            raise ValidationError(f"{key} must be true or false.")
    if flags["reference"] and test.tool != "dd":
        raise ValidationError("The direct-I/O reference read is a dd read: with fio, set direct instead.")
    if test.block_size % 512 and flags["reference"]:
        raise ValidationError("A direct-I/O reference read needs a block size that is a multiple of 512 bytes.")
    budget = hosttests.parse_bytes(params.get("byte_budget", max_budget()), "byte_budget", 1, max_budget())
    series = SeriesParams(test, repeats, budget, flags["cold"], flags["reference"], rolling)
    if series.bytes_needed > budget:
        raise ValidationError(
            f"This series writes {series.bytes_needed:,} bytes ({repeats} × {test.size:,}), more than its byte "
            f"budget of {budget:,}: raise byte_budget (at most {max_budget():,}) or ask for fewer repeats."
        )
    return series


def create(host: Host, params: dict, user=None) -> HostTestSeries:
    """Validate and record a series (queued); collectors.tasks.start_host_test_series sends it."""
    series = validate(params)
    return HostTestSeries.objects.create(
        host=host,
        tool=series.test.tool,
        params=params,
        repeats=series.repeats,
        byte_budget=series.byte_budget,
        created_by=user if getattr(user, "is_authenticated", False) else None,
    )


def request_cancel(series: HostTestSeries) -> bool:
    """Ask a live series to stop after its current repeat; False if it had already ended."""
    return bool(
        HostTestSeries.objects.filter(pk=series.pk, state__in=HostTestSeries.LIVE_STATES).update(cancel_requested=True)
    )


# -- running, on the host ---------------------------------------------------------------------
def run(series_id: int) -> HostTestSeries:
    """Run a series to its end (on the collector of its host); returns it final."""
    series = HostTestSeries.objects.select_related("host").get(pk=series_id)
    if not series.is_live:
        return series
    try:
        params = validate(series.params)  # again, on the host: the queue is not a trust boundary
    except ValidationError as exc:
        return _finish(series, "failed", " ".join(exc.messages))
    HostTestSeries.objects.filter(pk=series.pk).update(state="running", started_at=timezone.now())
    params.test.directory.mkdir(parents=True, exist_ok=True)
    direct_reads: list[float] = []
    written = series.bytes_written
    for index in range(series.results.count(), params.repeats):
        if HostTestSeries.objects.filter(pk=series.pk, cancel_requested=True).exists():
            return _finish(series, "cancelled", f"cancelled after {index} of {params.repeats} repeats")
        if written + params.bytes_per_repeat > params.byte_budget:
            return _finish(series, "failed", f"stopped at its byte budget ({params.byte_budget:,} bytes)")
        try:
            result = run_repeat(params, index, direct_reads)
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
            return _finish(series, "failed", f"repeat {index + 1}: {exc}"[:2000])
        result.series = series
        result.save()
        written += params.bytes_per_repeat
        HostTestSeries.objects.filter(pk=series.pk).update(bytes_written=written)
    return _finish(series, "succeeded", "")


def _finish(series: HostTestSeries, state: str, error: str) -> HostTestSeries:
    HostTestSeries.objects.filter(pk=series.pk).update(state=state, error=error, finished_at=timezone.now())
    series.refresh_from_db()
    return series


def run_repeat(params: SeriesParams, index: int, direct_reads: list[float]) -> HostTestResult:
    """One repeat: its figures, the cached flag decided against the series' direct reads so far."""
    started = time.monotonic()
    if params.test.tool == "fio":
        figures = hosttests.parse_fio_full(hosttests.run_argv(hosttests.fio_argv(params.test)).stdout)
        result = HostTestResult(
            index=index,
            write_bps=figures.get("write_bps"),
            read_bps=figures.get("read_bps"),
            iops=figures.get("read_iops") or figures.get("write_iops"),
            lat_p50_ms=figures.get("lat_p50_ms"),
            lat_p99_ms=figures.get("lat_p99_ms"),
        )
    else:
        result = _dd_repeat(params, index, direct_reads)
    result.time = timezone.now()
    result.seconds = time.monotonic() - started
    return result


def _dd_repeat(params: SeriesParams, index: int, direct_reads: list[float]) -> HostTestResult:
    p = params.test
    target = p.directory / f"{p.name}-{index}.dd"
    dd = shutil.which("dd") or "dd"
    count = p.size // p.block_size
    oflag = ["oflag=direct"] if p.direct else []
    try:
        write = hosttests.run_argv(
            [dd, "if=/dev/zero", f"of={target}", f"bs={p.block_size}", f"count={count}", "conv=fdatasync", *oflag]
        )
        written = hosttests.parse_dd(write.stderr, p.block_size, "write")["write_bps"]
        result = HostTestResult(index=index, write_bps=written)
        if p.rw == "write" and not params.cold and not params.reference:
            return result
        # Cold: dropped once, before both reads (an O_DIRECT read fills no page of the cache).
        # Warm: the pages stay as the write left them, the direct read included.
        if params.cold:
            _drop_cache(target)
        if params.reference:
            direct = hosttests.run_argv([dd, f"if={target}", "of=/dev/null", f"bs={p.block_size}", "iflag=direct"])
            result.direct_read_bps = hosttests.parse_dd(direct.stderr, p.block_size, "read")["read_bps"]
            direct_reads.append(result.direct_read_bps)
        result.resident_fraction = pagecache.resident_fraction(target)  # measured, not assumed
        iflag = ["iflag=direct"] if p.direct else []
        read = hosttests.run_argv([dd, f"if={target}", "of=/dev/null", f"bs={p.block_size}", *iflag])
        result.read_bps = hosttests.parse_dd(read.stderr, p.block_size, "read")["read_bps"]
        flags = read_flags(result.read_bps, result.resident_fraction, params, direct_reads)
        result.cached, result.cached_reason = flags.cached, flags.cached_reason
        result.faster_than_direct, result.faster_reason = flags.faster, flags.faster_reason
        return result
    finally:
        target.unlink(missing_ok=True)


def _drop_cache(path: Path) -> None:
    """Drop one file's pages from the page cache (they are clean: dd synced them)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class ReadFlags:
    cached: bool = False
    cached_reason: str = ""
    faster: bool = False
    faster_reason: str = ""


def read_flags(read_bps: float, resident: float, params: SeriesParams, direct_reads: list[float]) -> ReadFlags:
    """Whether a read measured memory (its pages were resident before it: cached) or ran faster
    than the device without them (faster than direct I/O), each with its evidence."""
    if params.test.direct:
        return ReadFlags()  # an O_DIRECT read bypasses the page cache whatever is resident
    if resident >= CACHED_RESIDENT:
        how = "read back just after it was written" if not params.cold else "though dropped before the read"
        return ReadFlags(
            cached=True,
            cached_reason=f"{resident:.0%} of the file's pages were in the page cache before the read ({how}): "
            "the page cache answered",
        )
    if direct_reads:
        reference = statistics.median(direct_reads)
        if reference > 0 and read_bps > FASTER_FACTOR * reference:
            return ReadFlags(
                faster=True,
                faster_reason=f"{read_bps / 1e6:,.0f} MB/s is {read_bps / reference:.1f}× the direct-I/O reads of "
                f"this series (median {reference / 1e6:,.0f} MB/s) with {resident:.0%} of its pages resident: faster "
                "than direct I/O (readahead or the hypervisor's cache)",
            )
    return ReadFlags()


# -- reading ----------------------------------------------------------------------------------
def rolling_mean(values: list[float | None], window: int) -> list[float | None]:
    """The mean of the last ``window`` values at each point (fewer at the start), gaps skipped."""
    out: list[float | None] = []
    kept: list[float] = []
    for value in values:
        if value is not None:
            kept.append(value)
        recent = kept[-window:]
        out.append(sum(recent) / len(recent) if recent else None)
    return out


def series_chart(series: HostTestSeries) -> dict:
    """Per result: write, read and direct read in bytes/s, each one's rolling mean, and the reads
    again with the flagged ones (cached, faster than direct I/O) left out, their own rolling mean."""
    window = all_params(series).get("rolling", ROLLING_DEFAULT)
    rows = list(
        series.results.order_by("index").values_list(
            "index", "write_bps", "read_bps", "direct_read_bps", "cached", "faster_than_direct"
        )
    )
    out: dict = {
        "window": window,
        "index": [r[0] + 1 for r in rows],
        "cached": [r[4] for r in rows],
        "faster": [r[5] for r in rows],
        "series": {},
    }
    unflagged = [None if r[4] or r[5] else r[2] for r in rows]
    for name, values in (
        ("write", [r[1] for r in rows]),
        ("read", [r[2] for r in rows]),
        ("read, flagged left out", unflagged if any(r[4] or r[5] for r in rows) else []),
        ("direct read", [r[3] for r in rows]),
    ):
        if any(v is not None for v in values):
            out["series"][name] = {"values": values, "rolling": rolling_mean(values, window)}
    return out


def all_params(series: HostTestSeries) -> dict:
    """Every parameter of the series as it ran, defaults included and sizes in bytes (a request
    names only what it changes: a series run cold by default said nothing of cold)."""
    raw = series.params if isinstance(series.params, dict) else {}
    try:
        checked = validate(raw)
    except ValidationError:
        return dict(raw)  # a series refused on its host: what was asked is all there is
    test = checked.test
    return {
        "tool": test.tool, "name": test.name, "subdir": raw.get("subdir", ""), "size": test.size,
        "block_size": test.block_size, "rw": test.rw, "iodepth": test.iodepth, "numjobs": test.numjobs,
        "ioengine": test.ioengine, "direct": test.direct, "runtime": test.runtime, "repeats": checked.repeats,
        "byte_budget": checked.byte_budget, "cold": checked.cold, "reference": checked.reference,
        "rolling": checked.rolling,
    }  # fmt: skip


def read_summaries(results: list[HostTestResult]) -> dict:
    """The reads' summary with every read, and with the flagged ones left out."""
    reads = [r for r in results if r.read_bps is not None]
    unflagged = [r.read_bps for r in reads if not (r.cached or r.faster_than_direct)]
    return {
        "read": summary([r.read_bps for r in reads]),
        "read_unflagged": summary(unflagged) if len(unflagged) < len(reads) else {},
        "cached_count": sum(r.cached for r in reads),
        "faster_count": sum(r.faster_than_direct for r in reads),
    }


def summary(values: list[float]) -> dict:
    if not values:
        return {}
    ordered = sorted(values)
    return {
        "n": len(values),
        "mean": statistics.fmean(values),
        "median": statistics.median(values),
        "p99": ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))],
        "min": ordered[0],
        "max": ordered[-1],
    }


# What makes two series comparable: the same test (tool, size, block size, I/O mode) and the same
# cold setting; a warm series beside a cold one compares memory with a disk.
COMPARABLE = ("tool", "size", "block_size", "rw", "direct", "ioengine", "iodepth", "numjobs", "cold")


def hosts_side_by_side(series: HostTestSeries) -> list[dict]:
    """The latest finished series of each host with the same tool, size, block size, I/O mode and
    cold setting: local disk, RBD and production side by side. Reads with and without the
    flagged ones."""
    same = {k: all_params(series).get(k) for k in COMPARABLE}
    rows = []
    seen: set[int] = set()
    candidates = HostTestSeries.objects.filter(tool=series.tool, state="succeeded").select_related("host")
    for other in candidates.order_by("-finished_at")[:200]:
        if other.host_id in seen:
            continue
        params = all_params(other)
        if {k: params.get(k) for k in COMPARABLE} != same:
            continue
        seen.add(other.host_id)
        results = list(other.results.only("write_bps", "read_bps", "cached", "faster_than_direct"))
        rows.append(
            {
                "series": other,
                "write": summary([r.write_bps for r in results if r.write_bps is not None]),
                **read_summaries(results),
            }
        )
    return sorted(rows, key=lambda r: r["series"].host.name)

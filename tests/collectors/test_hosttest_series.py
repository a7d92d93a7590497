"""Host-test series run for real (dd and fio in a test directory on this machine's disk): cold
reads against direct-I/O reads, the page cache caught, the byte budget, cancel, validation."""

from __future__ import annotations

import importlib
import os
import statistics
import subprocess
import time

import pytest
from django.apps import apps
from django.core.exceptions import ValidationError
from django.utils import timezone

from collectors import hosttest_series, hosttests, pagecache
from collectors.hosttest_series import _drop_cache
from collectors.models import Host, HostTestResult, HostTestSeries
from tests.support.pagecache import resident_pages

pytestmark = pytest.mark.django_db


@pytest.fixture
def test_dir(tmp_path, settings):
    # tmp_path is on the machine's ext4 disk here: O_DIRECT works (tmpfs would refuse it).
    settings.STORAGEOPS_HOST_TEST_DIR = str(tmp_path / "hosttests")
    return tmp_path / "hosttests"


def series(host: Host, **params) -> HostTestSeries:
    hosttest_series.validate(params)
    row = HostTestSeries.objects.create(host=host, tool=params.get("tool", "fio"), params=params,
                                        repeats=params.get("repeats", 1), byte_budget=10**12)  # fmt: skip
    return hosttest_series.run(row.pk)


def median_ratio(rows) -> float:
    """The series' median read over its median direct (O_DIRECT) read, both measured in each repeat."""
    return statistics.median(r.read_bps for r in rows) / statistics.median(r.direct_read_bps for r in rows)


def test_a_cold_read_starts_with_none_of_the_file_in_the_page_cache(test_dir):
    """What makes a read cold, checked where it must hold whatever the load: after the series'
    drop, not one page of the file is in the page cache (mincore), though it was all there."""
    test_dir.mkdir(parents=True, exist_ok=True)
    path = test_dir / "cold-probe"
    path.write_bytes(os.urandom(8 << 20))
    path.read_bytes()
    assert resident_pages(path)[0] > 0
    _drop_cache(path)
    assert resident_pages(path) == (0, 2048)


def settled(count, seconds: float = 5.0) -> int:
    """The count once two readings 0.1 s apart agree."""
    last, deadline = count(), time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.1)
        now = count()
        if now == last:
            return now
        last = now
    return last


def test_residency_is_measured_as_fincore_measures_it(test_dir):
    """collectors.pagecache against util-linux's fincore on the same file: none, part, all."""
    test_dir.mkdir(parents=True, exist_ok=True)
    path = test_dir / "fincore-probe"
    path.write_bytes(os.urandom(8 << 20))

    def fincore() -> int:
        out = subprocess.run(["fincore", "--noheadings", "--output", "PAGES", str(path)], capture_output=True,
                             text=True, check=True).stdout  # fmt: skip
        return int(out.split()[0])

    _drop_cache(path)
    assert pagecache.resident_pages(path) == (0, 2048) and fincore() == 0
    with path.open("rb") as f:
        f.read(1 << 20)  # a part (readahead brings more than the MiB read)
    # Readahead goes on after read() returns: both are compared once the count stands still.
    part = settled(lambda: pagecache.resident_pages(path)[0])
    assert 256 <= part < 2048 and fincore() == part
    path.read_bytes()
    assert pagecache.resident_pages(path) == (2048, 2048) and fincore() == 2048
    assert pagecache.resident_fraction(path) == 1.0


def test_cold_reads_are_flagged_cached_only_when_resident_and_warm_reads_with_their_fraction(test_dir):
    host = Host.objects.create(name="disk-host")
    common = {"tool": "dd", "rw": "read", "size": "32M", "block_size": "4M", "repeats": 5, "reference": True}
    cold = series(host, name="cold", cold=True, **common)
    assert cold.state == "succeeded", cold.error
    rows = list(cold.results.order_by("index"))
    assert len(rows) == 5 and all(r.write_bps and r.read_bps and r.direct_read_bps for r in rows)
    # Every cold read started with its pages dropped, measured just before it: none is cached.
    assert [r.resident_fraction for r in rows] == [0.0] * 5
    assert not any(r.cached for r in rows), [r.cached_reason for r in rows]
    # Faster than direct I/O is its own flag, by the rule: more than twice the median of the
    # series' direct reads so far (on this virtual disk the hypervisor's cache may do it).
    so_far = [statistics.median(r.direct_read_bps for r in rows[: i + 1]) for i in range(len(rows))]
    assert [r.faster_than_direct for r in rows] == [r.read_bps > 2 * d for r, d in zip(rows, so_far, strict=True)]
    assert all("faster than direct I/O (readahead or the hypervisor's cache)" in r.faster_reason
               for r in rows if r.faster_than_direct)  # fmt: skip

    warm = series(host, name="warm", cold=False, **common)
    rows = list(warm.results.order_by("index"))
    assert warm.state == "succeeded", warm.error
    # Read back as the write left it: resident (dd synced, nothing dropped; the kernel may still
    # evict a few pages under memory pressure: 94 % seen once in CI), and so flagged cached with
    # the fraction measured as the evidence, whatever the speed.
    assert all(r.resident_fraction >= 0.5 for r in rows), [r.resident_fraction for r in rows]
    assert all(r.cached and not r.faster_than_direct for r in rows)
    assert all(r.cached_reason.startswith(f"{r.resident_fraction:.0%} of the file's pages were in the page cache")
               for r in rows)  # fmt: skip
    print(f"read / direct read: cold {median_ratio(cold.results.all()):.2f}, warm {median_ratio(rows):.2f}")
    assert not list(test_dir.rglob("*.dd"))  # no file left behind


def test_a_warm_dd_series_left_at_the_default_io_reads(test_dir):
    """A warm-read series asked for with only what it changes (cold off) reads each file back; a
    warm write series, asked for as such, writes only."""
    host = Host.objects.create(name="warm-host")
    common = {"tool": "dd", "size": "8M", "block_size": "1M", "repeats": 2, "cold": False}
    warm = series(host, name="warm-default", **common)
    assert warm.state == "succeeded", warm.error
    assert hosttest_series.validate(common).test.rw == "read"
    assert all(r.read_bps and r.resident_fraction >= 0.5 and r.cached for r in warm.results.all())
    writes = series(host, name="warm-write", rw="write", **common)
    assert all(r.write_bps and r.read_bps is None for r in writes.results.all())


def test_fio_series_rows_carry_latency_percentiles_and_10M_blocks_are_accepted(test_dir):
    host = Host.objects.create(name="fio-host")
    done = series(host, tool="fio", name="fio10m", rw="write", size="20M", block_size="10M", repeats=2)
    assert done.state == "succeeded", done.error
    rows = list(done.results.all())
    assert len(rows) == 2 and all(r.write_bps > 0 and r.lat_p99_ms >= r.lat_p50_ms > 0 for r in rows)
    assert hosttests.validate_params({"tool": "dd", "block_size": "10M", "size": "1G"}).block_size == 10 << 20


def test_the_byte_budget_bounds_a_series_and_a_cancel_stops_it(test_dir):
    host = Host.objects.create(name="budget-host")
    # FZU's 50,000 x 1 GB: expressible, refused without the budget to write it.
    with pytest.raises(ValidationError, match="more than its byte budget"):
        hosttest_series.validate({"tool": "dd", "size": "1G", "repeats": 50_000, "byte_budget": "1T"})
    assert (
        hosttest_series.validate({"tool": "dd", "size": "1G", "repeats": 50_000, "byte_budget": "50T"}).repeats
        == 50_000
    )
    row = HostTestSeries.objects.create(host=host, tool="dd", params={"tool": "dd", "size": "1M", "repeats": 3},
                                        repeats=3, byte_budget=10**9, cancel_requested=True)  # fmt: skip
    done = hosttest_series.run(row.pk)
    assert done.state == "cancelled" and done.results.count() == 0 and "after 0 of 3" in done.error


@pytest.mark.parametrize(
    "bad",
    [{"repeats": 0}, {"repeats": "5"}, {"cold": "yes"}, {"reference": True, "tool": "fio"},
     {"block_size": "1000", "reference": True}, {"rolling": 0}, {"byte_budget": "lots"}, {"subdir": "../x"}],
)  # fmt: skip
def test_bad_series_parameters_are_refused(test_dir, bad):
    with pytest.raises(ValidationError):
        hosttest_series.validate({"tool": "dd", "size": "1M", **bad})


def test_rolling_mean():
    assert hosttest_series.rolling_mean([1, 3, None, 5, 7], 2) == [1, 2, 2, 4, 6]


def test_a_read_is_cached_only_when_resident_and_faster_than_direct_is_its_own_flag():
    params = hosttest_series.validate({"tool": "dd", "size": "1M", "cold": True, "reference": True})
    # 4,799 MB/s where the device gives 662, none of it resident: not the page cache.
    flags = hosttest_series.read_flags(4_799e6, 0.0, params, [662e6, 650e6, 700e6])
    assert not flags.cached and flags.faster
    assert flags.faster_reason.startswith("4,799 MB/s is 7.2× the direct-I/O reads of this series (median 662 MB/s)")
    # The same speed with its pages resident: cached, the fraction its evidence.
    flags = hosttest_series.read_flags(4_799e6, 0.75, params, [662e6])
    assert flags.cached and not flags.faster and flags.cached_reason.startswith("75% of the file's pages")
    assert hosttest_series.read_flags(700e6, 0.0, params, [662e6]) == hosttest_series.ReadFlags()
    # An O_DIRECT read is the device's whatever is resident.
    direct = hosttest_series.validate({"tool": "dd", "size": "1M", "direct": True})
    assert hosttest_series.read_flags(4_799e6, 1.0, direct, []) == hosttest_series.ReadFlags()


def test_side_by_side_compares_only_like_series_and_every_parameter_is_shown(test_dir):
    def finished(host: str, **params) -> HostTestSeries:
        row = HostTestSeries.objects.create(host=Host.objects.get_or_create(name=host)[0], tool="dd",
                                            params={"tool": "dd", "rw": "read", "size": "4M", **params},
                                            repeats=1, byte_budget=10**9, state="succeeded")  # fmt: skip
        return row

    cold = finished("rbd", block_size="1M")
    finished("local", block_size=1 << 20, cold=True)  # the same series written otherwise
    finished("warm-host", block_size="1M", cold=False)
    finished("direct-host", block_size="1M", direct=True)
    finished("write-host", block_size="1M", rw="write")
    assert [r["series"].host.name for r in hosttest_series.hosts_side_by_side(cold)] == ["local", "rbd"]
    shown = hosttest_series.all_params(cold)
    assert shown["cold"] is True and shown["block_size"] == 1 << 20 and shown["reference"] is False
    assert {"rolling", "direct", "iodepth", "ioengine", "repeats"} <= set(shown)


def test_means_with_and_without_flagged_reads(test_dir):
    host = Host.objects.create(name="mean-host")
    row = HostTestSeries.objects.create(host=host, tool="dd", params={"tool": "dd", "rolling": 2}, repeats=4,
                                        byte_budget=10**9, state="succeeded")  # fmt: skip
    for i, (read, cached, faster) in enumerate(
        [(100, False, False), (900, True, False), (300, False, True), (200, False, False)]
    ):
        HostTestResult.objects.create(series=row, index=i, time=timezone.now(), seconds=1, read_bps=read,
                                      cached=cached, faster_than_direct=faster)  # fmt: skip
    reads = hosttest_series.read_summaries(list(row.results.all()))
    assert reads["read"]["mean"] == 375 and reads["read_unflagged"]["mean"] == 150
    assert (reads["cached_count"], reads["faster_count"]) == (1, 1)
    chart = hosttest_series.series_chart(row)
    assert chart["series"]["read, flagged left out"]["values"] == [100, None, None, 200]
    assert chart["series"]["read, flagged left out"]["rolling"] == [100, 100, 100, 150]
    assert chart["series"]["read"]["rolling"] == [100, 500, 600, 250]


def test_migration_0006_moves_speed_flags_of_cold_series_to_faster_than_direct():
    migration = importlib.import_module("collectors.migrations.0006_hosttest_read_residency")
    host = Host.objects.create(name="old-host")
    speed = "4,799 MB/s is 7.2× the direct-I/O reads of this series (median 662 MB/s): faster than the device"
    rows = {}
    for name, cold, reason in [
        ("cold", None, speed),
        ("warm-fast", False, speed),
        ("warm", False, "read back just after it was written, its pages not dropped"),
    ]:
        params = {"tool": "dd"} if cold is None else {"tool": "dd", "cold": cold}
        series = HostTestSeries.objects.create(host=host, tool="dd", params=params, repeats=1, byte_budget=10**9)
        rows[name] = HostTestResult.objects.create(series=series, index=0, time=timezone.now(), seconds=1,
                                                   read_bps=1.0, cached=True, cached_reason=reason)  # fmt: skip
    migration.speed_flags_of_cold_series(apps, None)
    cold, warm_fast, warm = (HostTestResult.objects.get(pk=rows[k].pk) for k in ("cold", "warm-fast", "warm"))
    assert (cold.cached, cold.faster_than_direct, cold.faster_reason) == (False, True, speed)
    assert warm_fast.cached and not warm_fast.faster_than_direct  # read warm: its pages were there
    assert warm.cached and not warm.faster_than_direct

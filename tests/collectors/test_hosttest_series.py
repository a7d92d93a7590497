"""Host-test series run for real (dd and fio in a test directory on this machine's disk): cold
reads against direct-I/O reads, the page cache caught, the byte budget, cancel, validation."""

from __future__ import annotations

import os
import statistics

import pytest
from django.core.exceptions import ValidationError

from collectors import hosttest_series, hosttests
from collectors.hosttest_series import _drop_cache
from collectors.models import Host, HostTestSeries
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


def test_cold_reads_are_judged_by_the_rule_and_warm_reads_are_flagged(test_dir):
    host = Host.objects.create(name="disk-host")
    common = {"tool": "dd", "rw": "read", "size": "32M", "block_size": "4M", "repeats": 5, "reference": True}
    cold = series(host, name="cold", cold=True, **common)
    assert cold.state == "succeeded", cold.error
    rows = list(cold.results.order_by("index"))
    assert len(rows) == 5 and all(r.write_bps and r.read_bps and r.direct_read_bps for r in rows)
    cold_ratio = median_ratio(rows)
    # A cold read may still come back flagged: on this virtual disk the hypervisor's cache can
    # outrun twice the direct reads (2 of 5 once, under a stressed suite). What must hold is the
    # rule: flagged exactly when faster than twice the median of the series' direct reads so far,
    # with that evidence.
    so_far = [statistics.median(r.direct_read_bps for r in rows[: i + 1]) for i in range(len(rows))]
    assert [r.cached for r in rows] == [r.read_bps > 2 * d for r, d in zip(rows, so_far, strict=True)], [
        r.cached_reason for r in rows
    ]
    assert all("the direct-I/O reads of this series" in r.cached_reason for r in rows if r.cached)

    warm = series(host, name="warm", cold=False, **common)
    rows = list(warm.results.order_by("index"))
    assert warm.state == "succeeded" and all(r.cached for r in rows)
    # Read back warm: flagged whatever it measured (on this virtual disk, direct reads of 4 MB
    # blocks come near memory speed too, so the factor alone need not show it).
    assert all("page cache" in r.cached_reason for r in rows), [r.cached_reason for r in rows]
    # The speeds say nothing more on this virtual disk, so they are printed, not asserted: a fixed
    # "cold within 2x of direct" failed at 2.07x beside a stressed suite, and warm reads came out
    # at 1.29x against cold ones' 1.72x (direct reads of a cached file run at memory speed too).
    # That the cold reads start cold is the test above.
    print(f"read / direct read: cold {cold_ratio:.2f}, warm {median_ratio(rows):.2f}")
    assert not list(test_dir.rglob("*.dd"))  # no file left behind


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


def test_a_read_twice_as_fast_as_the_direct_reads_is_flagged_with_its_evidence():
    params = hosttest_series.validate({"tool": "dd", "size": "1M", "cold": True, "reference": True})
    cached, reason = hosttest_series.cached_verdict(4_799e6, params, [662e6, 650e6, 700e6])
    assert cached and reason.startswith("4,799 MB/s is 7.2× the direct-I/O reads of this series (median 662 MB/s)")
    assert hosttest_series.cached_verdict(700e6, params, [662e6]) == (False, "")

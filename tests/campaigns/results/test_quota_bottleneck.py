"""A door held back by its cgroup's CPU quota on a host busy with other work: the bottleneck is
the quota, named with cpu.stat's throttling counters as its evidence, not "CPU (all cores)"."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from campaigns import runs
from campaigns.models import RunStep
from campaigns.results import verdicts
from collectors.models import Host, MetricSample
from tests.support.factories import campaign, endpoint

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
STEP = 10  # seconds


def _run(door: Host, concurrencies: list[int], throughputs: list[float]):
    src = endpoint("q-src", "mock://src.test/data/")
    dst = endpoint("q-dst", "mock://dst.test/data/")
    dst.hosts.set([door])
    run = runs.create_run(campaign("quota", [src], [dst], concurrency_steps=concurrencies, step_seconds=STEP))
    steps = []
    for i, (c, t) in enumerate(zip(concurrencies, throughputs, strict=True)):
        start = T0 + timedelta(seconds=i * STEP)
        RunStep.objects.create(
            run=run, index=i, concurrency=c, started_at=start, ended_at=start + timedelta(seconds=STEP)
        )
        steps.append(
            {"step": i, "concurrency": c, "throughput_bps": t, "files_ok": 100, "files_failed": 0, "errors": {}}
        )
    return run, {"steps": steps, "doors": {door.name: {}}}


def _samples(host: Host, step: int, metric: str, values: list[float], label: str = "") -> None:
    start = T0 + timedelta(seconds=step * STEP)
    MetricSample.objects.bulk_create(
        MetricSample(host=host, metric=metric, label=label, time=start + timedelta(seconds=2 + 3 * k), value=v)
        for k, v in enumerate(values)
    )


def _quota_door(throttled: float) -> tuple:
    door = Host.objects.create(name="door2", link_speed_bps=10_000_000_000, sample_interval=1)
    run, summary = _run(door, [1, 2, 4], [2.3e6, 2.33e6, 2.32e6])
    for step in range(3):
        _samples(door, step, "cpu.percent", [100, 100])  # the shared host, busy with other work
        _samples(door, step, "proc.cpu_percent", [1.2, 1.2], "xrootd")  # 80 % of its quota, as a mean
        _samples(door, step, "proc.cpus_allowed", [0.015, 0.015], "xrootd")
        _samples(door, step, "proc.cpu_quota_cores", [0.015, 0.015], "xrootd")
        _samples(door, step, "proc.cores_busy_percent", [100, 100], "xrootd")
        _samples(door, step, "proc.cpu_throttled_percent", [throttled, throttled], "xrootd")
        _samples(door, step, "proc.cpu_throttled_per_s", [0.9, 0.9], "xrootd")
    return run, summary


def test_a_throttled_quota_is_the_bottleneck_with_its_counters_as_evidence():
    run, summary = _quota_door(throttled=96)
    b = verdicts.run_verdict(run, summary, T0 + timedelta(seconds=30))["bottleneck"]
    assert b["title"] == "CPU quota of xrootd on door2"
    assert (b["resource"], b["label"], b["value"]) == ("daemon_cpu", "xrootd", pytest.approx(0.96))
    assert b["detail"].startswith("throttled in 96 % of its quota periods, 0.90 s a second kept waiting (cpu.stat)")
    evidence = b["evidence"]
    assert (evidence["throttled_percent"], evidence["throttled_per_s"]) == (pytest.approx(96), pytest.approx(0.9))
    assert "proc.cpu_throttled_percent" in evidence["metrics"]


def test_without_throttling_the_quota_is_not_named():
    run, summary = _quota_door(throttled=0)
    b = verdicts.run_verdict(run, summary, T0 + timedelta(seconds=30))["bottleneck"]
    # Never throttled, its quota did not hold it back: the busy host is what the samples show.
    assert b["title"] == "CPU (all cores) on door2" and "throttled_percent" not in b["evidence"]

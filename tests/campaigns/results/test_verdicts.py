"""The verdict logic on hand-built steps and samples: knee, first saturated resource, capacity."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from campaigns import runs
from campaigns.models import Endpoint, Run, RunStep
from campaigns.results import verdicts
from collectors.models import Host, MetricSample
from tests.support.factories import campaign, endpoint

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
STEP = 10  # seconds


def curve(*points: tuple[int, float | None]) -> list[dict]:
    return [{"step": i, "concurrency": c, "throughput_bps": t} for i, (c, t) in enumerate(points)]


def test_knee_is_the_smallest_concurrency_within_95_percent_of_the_peak():
    result = verdicts.knee(curve((1, 100e6), (2, 190e6), (4, 300e6), (8, 290e6), (16, 310e6)))
    assert result["status"] == "levelled"
    assert result["peak"]["concurrency"] == 16
    assert result["knee"] == {"step": 2, "concurrency": 4, "throughput_bps": 300e6}  # 300 >= 0.95 * 310


def test_a_curve_whose_knee_is_its_last_step_is_still_rising():
    assert verdicts.knee(curve((1, 100e6), (2, 180e6), (4, 250e6)))["status"] == "still_rising"
    # Within 5 % of the previous step is levelled off, not rising.
    assert verdicts.knee(curve((1, 100e6), (2, 200e6), (4, 209e6)))["knee"]["concurrency"] == 2


def test_a_last_step_within_noise_of_the_earlier_ones_is_not_a_rise():
    # Seen on a door confined to one core: flat, with the last step 6 % up by chance.
    result = verdicts.knee(curve((1, 638e6), (2, 632e6), (4, 635e6), (8, 674e6)))
    assert result["status"] == "levelled"
    assert result["knee"]["concurrency"] == 1
    assert result["peak"]["concurrency"] == 8  # the peak is still reported as measured
    # More than 10 % above every earlier step is a rise.
    assert verdicts.knee(curve((1, 638e6), (2, 632e6), (4, 635e6), (8, 710e6)))["status"] == "still_rising"


def test_degenerate_curves():
    assert verdicts.knee(curve((4, 100e6)))["status"] == "single_step"
    assert verdicts.knee(curve((1, None), (2, 0)))["status"] == "no_data"
    assert verdicts.knee([])["status"] == "no_data"


# -- saturation on hand-built samples ---------------------------------------------------------
@pytest.fixture
def door(db) -> Host:
    return Host.objects.create(name="door-a", link_speed_bps=10_000_000_000, sample_interval=1)


def _run(door: Host, concurrencies: list[int], throughputs: list[float], **fields):
    src = Endpoint.objects.filter(name="v-src").first() or endpoint("v-src", "mock://src.test/data/")
    dst = endpoint("v-dst", "mock://dst.test/data/")
    dst.hosts.set([door])
    obj = campaign("verdict", [src], [dst], concurrency_steps=concurrencies, step_seconds=STEP, **fields)
    run = runs.create_run(obj)
    steps = []
    for i, (c, t) in enumerate(zip(concurrencies, throughputs, strict=True)):
        start = T0 + timedelta(seconds=i * STEP)
        end = start + timedelta(seconds=STEP)
        RunStep.objects.create(run=run, index=i, concurrency=c, started_at=start, ended_at=end)
        row = {"step": i, "concurrency": c, "throughput_bps": t, "files_ok": 100, "files_failed": 0, "errors": {}}
        steps.append(row)
    summary = {"steps": steps, "doors": {door.name: {}}}
    return run, summary


def _samples(host: Host, step: int, metric: str, values: list[float], label: str = "") -> None:
    start = T0 + timedelta(seconds=step * STEP)
    MetricSample.objects.bulk_create(
        MetricSample(host=host, metric=metric, label=label, time=start + timedelta(seconds=2 + 3 * k), value=v)
        for k, v in enumerate(values)
    )


def test_the_resource_saturated_at_the_knee_is_named_from_there(door):
    """Both kinds of evidence (issue 43): the daemon full at a step, and the curve not rising
    beyond noise after it. At 2 it was full while throughput still rose 12 % to 8; at the knee (4)
    it was full and the curve stayed flat."""
    run, summary = _run(door, [1, 2, 4, 8], [100e6, 180e6, 200e6, 201e6])  # knee at 4
    for step, daemon in enumerate([50, 95, 99, 99]):
        _samples(door, step, "proc.cpu_percent", [daemon, daemon], "xrootd")
        _samples(door, step, "proc.cpus_allowed", [1, 1], "xrootd")
        _samples(door, step, "cpu.percent", [30, 30])
    # The network saturates too, but only after the knee: it is not the bottleneck.
    _samples(door, 3, "net.tx_bps", [1.2e9, 1.2e9], "eth0")
    verdict = verdicts.run_verdict(run, summary, T0 + timedelta(seconds=40))
    assert verdict["status"] == "levelled" and verdict["knee"]["concurrency"] == 4
    b = verdict["bottleneck"]
    assert (b["door"], b["resource"], b["label"], b["concurrency"]) == ("door-a", "daemon_cpu", "xrootd", 4)
    assert b["value"] == pytest.approx(0.99) and verdict["near_limit"] is None
    assert "CPU of xrootd on door-a" in verdict["headline"] and "Knee at concurrency 4" in verdict["headline"]
    step3 = {(r["resource"], r["label"]): r["value"] for r in verdict["saturation"][3]["readings"]}
    assert step3[("network", "eth0")] == pytest.approx(1.2e9 * 8 / 10e9)


def test_a_resource_full_while_throughput_still_doubles_is_near_its_limit_not_the_bottleneck(door):
    """The demo's first run: 'Bottleneck: CPU on door2 99.8 % from concurrency 2' while throughput
    doubled after that step (12.5 -> 24.1 MB/s) and the headline said still rising."""
    run, summary = _run(door, [1, 2, 4], [6.2e6, 12.5e6, 24.1e6])
    for step in range(3):
        _samples(door, step, "cpu.percent", [60, 60] if step == 0 else [99.8, 99.8])
    verdict = verdicts.run_verdict(run, summary, T0 + timedelta(seconds=30))
    assert verdict["status"] == "still_rising" and verdict["bottleneck"] is None
    assert verdicts.kind(verdict) == ("still_rising", "near_limit")
    assert "Bottleneck" not in verdict["headline"], verdict["headline"]
    assert verdict["headline"].endswith(
        "Near its limit: CPU (all cores) on door-a at 100 % (100 % of all cores) at concurrency 4, the last step; "
        "a step beyond it must tell whether it holds the curve back."
    ), verdict["headline"]
    assert verdicts.rows(verdict)["knee"] == "not reached (still rising at ×4, 24.1 MB/s)"
    assert verdicts.rows(verdict)["capacity"].startswith(
        "24.1 MB/s per door at the last step (×4; the knee not reached: a door can do more); "
    ), verdicts.rows(verdict)


def test_a_resource_full_before_the_knee_is_said_with_the_rise_after_it(door):
    run, summary = _run(door, [1, 2, 4, 8], [6.2e6, 12.5e6, 24.1e6, 24.3e6])
    _samples(door, 1, "cpu.percent", [92, 92])
    verdict = verdicts.run_verdict(run, summary, T0 + timedelta(seconds=40))
    assert verdict["status"] == "levelled" and verdict["bottleneck"] is None
    assert (
        "Near its limit, not yet the limit: CPU (all cores) on door-a at 92 % (92 % of all cores) at concurrency 2, "
        "while throughput still rose 94 % to concurrency 8." in verdict["headline"]
    ), verdict["headline"]


def test_a_daemon_allowed_two_cores_is_not_saturated_at_one(door):
    run, summary = _run(door, [1, 2, 4], [100e6, 150e6, 151e6])
    for step in range(3):
        _samples(door, step, "proc.cpu_percent", [100, 100], "xrootd")
        _samples(door, step, "proc.cpus_allowed", [2, 2], "xrootd")
    verdict = verdicts.run_verdict(run, summary, T0 + timedelta(seconds=30))
    assert verdict["bottleneck"] is None
    assert "Nothing saturated at or before the knee" in verdict["headline"]


def test_network_against_the_link_speed_and_memory_and_disk(door):
    run, summary = _run(door, [1, 2], [100e6, 100e6])
    _samples(door, 0, "net.rx_bps", [1.15e9, 1.17e9], "eth0")  # 9.3 of 10 Gbit/s
    _samples(door, 0, "disk.busy_percent", [40], "sda")
    _samples(door, 0, "mem.used", [3e9])
    _samples(door, 0, "mem.total", [4e9])
    verdict = verdicts.run_verdict(run, summary, T0 + timedelta(seconds=20))
    assert (verdict["bottleneck"]["resource"], verdict["bottleneck"]["label"]) == ("network", "eth0")
    values = {r["resource"]: r["value"] for r in verdict["saturation"][0]["readings"]}
    assert values["disk"] == pytest.approx(0.40) and values["memory"] == pytest.approx(0.75)
    # Without a link speed the network cannot be judged, and the headline says nothing saturated.
    Host.objects.filter(pk=door.pk).update(link_speed_bps=None)
    assert verdicts.run_verdict(run, summary, T0 + timedelta(seconds=20))["bottleneck"] is None


def test_samples_outside_the_steps_do_not_count_and_no_samples_is_said(door):
    run, summary = _run(door, [1, 2], [100e6, 100e6])
    MetricSample.objects.create(host=door, metric="cpu.percent", time=T0 - timedelta(seconds=1), value=100)
    verdict = verdicts.run_verdict(run, summary, T0 + timedelta(seconds=20))
    assert verdict["samples_used"] == 0 and verdict["bottleneck"] is None
    assert "Saturation unknown" in verdict["headline"]


def test_overload_errors_are_named_when_no_resource_saturated(door):
    run, summary = _run(door, [2, 8, 16], [100e6, 100e6, 100e6])
    summary["steps"][0].update(files_ok=90, files_failed=10, errors={"checksum_timeout": 8, "not_found": 2})
    _samples(door, 0, "cpu.percent", [20])
    verdict = verdicts.run_verdict(run, summary, T0 + timedelta(seconds=30))
    assert verdict["overload_errors"] == {"step": 0, "concurrency": 2, "rate": pytest.approx(0.08)}
    assert "checksum timeouts" in verdict["headline"] and "From concurrency 2, 8.0 %" in verdict["headline"]


def _with_target_rate(run: Run, bps: int | None) -> Run:
    # A run's spec is read once per instance (a snapshot never changes): store, then reload.
    snapshot = {**run.snapshot, "parameters": {**run.snapshot["parameters"], "target_rate_bps": bps}}
    Run.objects.filter(pk=run.pk).update(snapshot=snapshot)
    return Run.objects.get(pk=run.pk)


def test_capacity_projection_from_the_knee(door, settings):
    settings.STORAGEOPS_TARGET_RATE_BPS = 40_000_000_000
    run, summary = _run(door, [1, 2, 4], [400e6, 700e6, 710e6])  # knee at 2: 700 MB/s on one door
    verdict = verdicts.run_verdict(run, summary, T0 + timedelta(seconds=30))
    cap = verdict["capacity"]
    assert cap["per_door_bps"] == 700e6 and cap["doors_measured"] == 1
    assert cap["doors_needed"] == 8  # 40 Gbit/s = 5 GB/s; 5 / 0.7 = 7.1 → 8
    assert any("linearly" in a for a in cap["assumptions"])
    assert "8 door(s) like these for 40 Gbit/s" in verdict["headline"] and "At most" not in verdict["headline"]
    # The campaign's own target wins over the site's.
    run = _with_target_rate(run, 10_000_000_000)
    assert verdicts.run_verdict(run, summary, T0 + timedelta(seconds=30))["capacity"]["doors_needed"] == 2
    settings.STORAGEOPS_TARGET_RATE_BPS = 0
    run = _with_target_rate(run, None)
    cap = verdicts.run_verdict(run, summary, T0 + timedelta(seconds=30))["capacity"]
    assert cap["doors_needed"] is None and "no target rate set" in cap["note"]


def test_a_sweep_still_rising_projects_a_bound_not_a_count(door, settings):
    settings.STORAGEOPS_TARGET_RATE_BPS = 40_000_000_000
    run, summary = _run(door, [1, 2, 4], [400e6, 700e6, 900e6])
    verdict = verdicts.run_verdict(run, summary, T0 + timedelta(seconds=30))
    assert verdict["status"] == "still_rising" and verdict["capacity"]["bound"] == "at most"
    assert "At most 6 door(s) like these for 40 Gbit/s" in verdict["headline"]
    assert "still rising: a door can do more" in verdict["headline"]


def test_capacity_splits_the_knee_over_the_doors():
    cap = verdicts.capacity({"throughput_bps": 900e6}, ["a", "b", "c"], 24_000_000_000, still_rising=True)
    assert cap["per_door_bps"] == 300e6 and cap["doors_needed"] == 10
    assert any("upper bound" in a for a in cap["assumptions"])


def test_a_confined_daemon_whose_core_others_keep_busy_is_cpu_bound(door):
    run, summary = _run(door, [1, 2, 4], [100e6, 101e6, 100e6])
    for step in range(3):
        _samples(door, step, "proc.cpu_percent", [60, 62], "xrootd")  # its share of core 0...
        _samples(door, step, "proc.cpus_allowed", [1, 1], "xrootd")
        _samples(door, step, "proc.cores_busy_percent", [97, 99], "xrootd")  # ...which is full
        _samples(door, step, "cpu.percent", [55, 55])
    verdict = verdicts.run_verdict(run, summary, T0 + timedelta(seconds=30))
    b = verdict["bottleneck"]
    assert (b["resource"], b["label"], b["concurrency"]) == ("cores", "xrootd", 1)
    assert b["value"] == pytest.approx(0.98) and b["detail"] == "98 % busy; most of it xrootd's own (61 %)"
    assert "CPU of the cores xrootd may use on" in verdict["headline"]


def test_a_daemon_under_a_cgroup_cpu_quota_is_judged_against_its_quota(door):
    run, summary = _run(door, [1, 2], [100e6, 101e6])
    for step in range(2):
        _samples(door, step, "proc.cpu_percent", [33, 33], "xrootd")  # a third of one core...
        _samples(door, step, "proc.cpus_allowed", [1 / 3, 1 / 3], "xrootd")  # ...all its quota allows
        _samples(door, step, "proc.cpu_quota_cores", [1 / 3, 1 / 3], "xrootd")
        _samples(door, step, "cpu.percent", [20, 20])
    b = verdicts.run_verdict(run, summary, T0 + timedelta(seconds=20))["bottleneck"]
    assert (b["resource"], b["label"], b["concurrency"]) == ("daemon_cpu", "xrootd", 1)
    assert b["value"] == pytest.approx(0.99) and b["detail"] == "33 % of 0.333 core(s) (its cgroup's CPU quota)"


def _quota_held(door: Host, percents: list[float], quota: float = 0.1) -> None:
    for step, percent in enumerate(percents):
        _samples(door, step, "proc.cpu_percent", [percent, percent], "xrootd")
        _samples(door, step, "proc.cpus_allowed", [quota, quota], "xrootd")
        _samples(door, step, "proc.cpu_quota_cores", [quota, quota], "xrootd")
        _samples(door, step, "cpu.percent", [20, 20])


def test_a_curve_creeping_up_while_its_door_stays_at_its_quota_is_held_there(door):
    """Seen on door2 held to a tenth of a core: 6.19, 11.5, 11.2, 13.8 MB/s at 1, 2, 4, 8, the
    quota full from 2 on. It read "still rising, near its limit": 20 % more for four times the
    copies is the quota giving a little more as its work batches up, and the knee is at 2."""
    run, summary = _run(door, [1, 2, 4, 8], [6.19e6, 11.5e6, 11.2e6, 13.8e6])
    _quota_held(door, [6.0, 9.6, 9.7, 9.8])
    verdict = verdicts.run_verdict(run, summary, T0 + timedelta(seconds=40))
    assert verdict["status"] == "levelled" and verdict["knee"]["concurrency"] == 2, verdict["headline"]
    b = verdict["bottleneck"]
    assert (b["resource"], b["label"], b["concurrency"]) == ("daemon_cpu", "xrootd", 2), verdict["headline"]
    assert "its cgroup's CPU quota" in b["detail"]
    assert verdict["held"]["to"] == 8 and verdict["held"]["rose"] == pytest.approx(0.2, abs=0.001)
    said = verdict["headline"]
    assert "Still rising" not in said and "Near its limit" not in said, said
    assert "throughput rose only 20 % more to concurrency 8: the limit, not a rise." in said, said
    assert verdicts.rows(verdict)["knee"].startswith("concurrency 2"), verdicts.rows(verdict)


def test_a_curve_that_rises_in_proportion_or_whose_resource_empties_is_not_held(door):
    # Full at every step but doubling: not the limit (the reading is wrong or not binding).
    run, summary = _run(door, [1, 2, 4], [6.2e6, 12.5e6, 24.1e6])
    _quota_held(door, [9.9, 9.9, 9.9])
    verdict = verdicts.run_verdict(run, summary, T0 + timedelta(seconds=30))
    assert verdict["status"] == "still_rising" and verdict["held"] is None and verdict["bottleneck"] is None


def test_a_curve_whose_resource_is_full_at_one_step_only_is_not_held(door):
    run, summary = _run(door, [1, 2, 4, 8], [6.19e6, 11.5e6, 11.2e6, 13.8e6])
    _quota_held(door, [6.0, 9.6, 5.0, 9.8])
    verdict = verdicts.run_verdict(run, summary, T0 + timedelta(seconds=40))
    assert verdict["status"] == "still_rising" and verdict["held"] is None


def test_the_sample_that_began_before_a_step_is_not_counted_in_it(door):
    door.sample_interval = 3
    door.save()
    run, summary = _run(door, [1, 2], [100e6, 100e6])
    # Stamped 2 s into the step, the first sample covers a second before it: the door idle.
    _samples(door, 0, "proc.cpu_percent", [40, 99, 99], "xrootd")
    _samples(door, 0, "proc.cpus_allowed", [1, 1, 1], "xrootd")
    b = verdicts.run_verdict(run, summary, T0 + timedelta(seconds=20))["bottleneck"]
    assert (b["value"], b["concurrency"]) == (pytest.approx(0.99), 1)
    # Steps shorter than two intervals would keep too few samples: they keep them all.
    door.sample_interval = 6
    door.save()
    verdict = verdicts.run_verdict(run, summary, T0 + timedelta(seconds=20))
    assert verdict["bottleneck"] is None
    [reading] = [r for r in verdict["saturation"][0]["readings"] if r["resource"] == "daemon_cpu"]
    assert reading["value"] == pytest.approx((40 + 99 + 99) / 300)


def test_between_equal_readings_the_daemons_cores_are_named_rather_than_the_machine(door):
    run, summary = _run(door, [1, 2], [100e6, 100e6])
    _samples(door, 0, "cpu.percent", [100, 100])
    _samples(door, 0, "proc.cpu_percent", [198, 200], "xrootd")
    _samples(door, 0, "proc.cpus_allowed", [2, 2], "xrootd")
    _samples(door, 0, "proc.cores_busy_percent", [100, 100], "xrootd")
    b = verdicts.run_verdict(run, summary, T0 + timedelta(seconds=20))["bottleneck"]
    # The daemon fills both its cores itself: its own CPU is the narrowest diagnosis.
    assert (b["resource"], b["label"], b["value"]) == ("daemon_cpu", "xrootd", pytest.approx(0.995))


def test_a_host_busy_with_other_work_is_named_as_the_host_not_the_daemon(door):
    """FZU's case: "CPU of xrootd already at 100 % (7 % of 2 cores)" blamed the daemon."""
    run, summary = _run(door, [1, 2, 4], [100e6, 101e6, 100e6])
    for step in range(3):
        _samples(door, step, "cpu.percent", [100, 100])
        _samples(door, step, "proc.cpu_percent", [14, 14], "xrootd")  # 7 % of its two cores
        _samples(door, step, "proc.cpus_allowed", [2, 2], "xrootd")
        _samples(door, step, "proc.cores_busy_percent", [100, 100], "xrootd")
    verdict = verdicts.run_verdict(run, summary, T0 + timedelta(seconds=30))
    b = verdict["bottleneck"]
    assert (b["resource"], b["label"], b["value"]) == ("cores", "xrootd", 1.0)
    assert b["detail"] == "100 % busy; xrootd itself 7 %: the host is busy with other work"
    [own] = [r for r in verdict["saturation"][0]["readings"] if r["resource"] == "daemon_cpu"]
    assert own["value"] == pytest.approx(0.07)  # the daemon's own share, not the host's
    assert "the host is busy with other work" in verdict["headline"]
    # The verdict says what it rests on: this door's samples of those metrics over the knee's step.
    evidence = b["evidence"]
    assert (evidence["door"], evidence["host_id"], evidence["label"]) == (door.name, door.pk, "xrootd")
    assert evidence["metrics"][0] == "proc.cores_busy_percent"
    step = run.steps.get(index=b["step"])
    assert (evidence["from"], evidence["to"]) == (step.started_at.isoformat(), step.ended_at.isoformat())
    assert evidence["samples"] == 2  # the two samples of each metric in that step


def test_a_door_with_a_single_sample_in_a_step_is_not_judged_there(door):
    run, summary = _run(door, [1, 2], [100e6, 101e6])
    _samples(door, 0, "cpu.percent", [100])  # one moment of a full machine, in the step that matters
    _samples(door, 1, "cpu.percent", [30, 30])
    verdict = verdicts.run_verdict(run, summary, T0 + timedelta(seconds=20))
    assert verdict["bottleneck"] is None
    assert verdict["saturation"][0]["not_enough_samples"] == {door.name: 1}
    assert verdict["saturation"][0]["readings"] == []
    assert (
        f"not enough samples ({door.name}: 1 sample in the step at concurrency 1 of 10 s, 2 needed: its collector "
        "samples every 1 s, so steps of at least 3 s (or a shorter sample interval))" in verdict["headline"]
    ), verdict["headline"]


@pytest.mark.parametrize("mode", ["pull", "push"])
def test_a_pulls_source_door_is_not_judged_only_its_destination(door, mode):
    """Issue 17: a pull's source door was named as the bottleneck. The destination pulls; the
    source only serves reads, so its full CPU is not the verdict of a run whose doors are the
    destinations. Pushed, the same samples make the source the door under test."""
    source = Host.objects.create(name="door-src", sample_interval=1)
    run, summary = _run(door, [1, 2, 4], [100e6, 101e6, 100e6], tpc_mode=mode)
    run.snapshot["sources"][0]["hosts"] = [{"id": source.pk, "name": source.name}]
    run.save(update_fields=["snapshot"])
    run = Run.objects.get(pk=run.pk)
    for step in range(3):
        _samples(source, step, "cpu.percent", [100, 100])  # the source machine is full
        _samples(door, step, "cpu.percent", [40, 40])
    b = verdicts.run_verdict(run, summary, T0 + timedelta(seconds=30))["bottleneck"]
    if mode == "pull":
        assert b is None, b  # nothing on the destination is full: no door named
    else:
        assert (b["door"], b["resource"]) == ("door-src", "cpu"), b


def test_a_checksum_load_is_headlined_by_its_latency_and_a_transfer_sweep_is_not(door):
    steps = [
        {"step": 0, "concurrency": 2, "throughput_bps": 100e6, "files_ok": 40, "files_failed": 0, "errors": {},
         "latency_p50": 0.05, "latency_p95": 0.12, "window_seconds": 4.0},
        {"step": 1, "concurrency": 8, "throughput_bps": 101e6, "files_ok": 30, "files_failed": 10, "errors": {},
         "latency_p50": 0.4, "latency_p95": 3.2, "window_seconds": 5.0},
    ]  # fmt: skip
    run, _ = _run(door, [2, 8], [100e6, 101e6], kind="checksum_load")
    verdict = verdicts.run_verdict(run, {"steps": steps, "doors": {}}, T0 + timedelta(seconds=20))
    assert verdict["latency"][1] == {"step": 1, "concurrency": 8, "p50": 0.4, "p95": 3.2, "answers_per_s": 8.0}
    assert verdict["headline"].startswith(
        "Checksum latency p95 120 ms at concurrency 2 → 3.2 s at 8 (p50 50 ms → 400 ms); at best 10.0 answers/s. "
    ), verdict["headline"]
    assert "latency" not in verdicts.run_verdict(*_transfer_twin(run, steps), T0 + timedelta(seconds=20))


def _transfer_twin(run: Run, steps: list[dict]) -> tuple[Run, dict]:
    """The same run and steps, as a transfer sweep (its snapshot's kind changed)."""
    run.snapshot["parameters"]["kind"] = "transfer"
    run.save(update_fields=["snapshot"])
    return Run.objects.get(pk=run.pk), {"steps": steps, "doors": {}}


def test_a_door_at_its_configured_data_rate_is_named_by_its_rate_not_its_cpu(door):
    run, summary = _run(door, [1, 2, 4, 8], [4.1e6, 7.6e6, 7.9e6, 7.9e6])  # knee at 2
    for step, rate in enumerate([4.1e6, 7.7e6, 7.95e6, 7.9e6]):
        _samples(door, step, "proc.io_bps", [rate, rate], "xrootd")
        _samples(door, step, "door.rate_limit_bps", [8e6, 8e6], "door2.cfg")
        _samples(door, step, "cpu.percent", [12, 12])
    verdict = verdicts.run_verdict(run, summary, T0 + timedelta(seconds=40))
    b = verdict["bottleneck"]
    assert (b["resource"], b["label"], b["concurrency"]) == ("rate", "xrootd", 2), verdict["headline"]
    assert verdict["headline"].endswith(
        "Bottleneck: data-rate limit of xrootd on door-a at 96 % (7.7 MB/s through xrootd against the 8 MB/s its "
        "door2.cfg allows) from concurrency 2."
    ), verdict["headline"]


def test_a_slow_source_is_named_as_the_other_side(door):
    source = Host.objects.create(name="door-src", sample_interval=1)
    src = endpoint("v-src", "mock://src.test/data/")
    src.hosts.set([source])  # before the run: its snapshot freezes the hosts of both sides
    run, summary = _run(door, [1, 2, 4], [3.9e6, 4.0e6, 4.0e6])  # levelled from 1
    for step in range(3):
        _samples(door, step, "cpu.percent", [10, 10])
        _samples(source, step, "proc.io_bps", [3.95e6, 3.95e6], "xrootd")
        _samples(source, step, "door.rate_limit_bps", [4e6, 4e6], "door1.cfg")
    verdict = verdicts.run_verdict(run, summary, T0 + timedelta(seconds=30))
    assert verdict["bottleneck"] is None and verdicts.kind(verdict) == ("levelled", "far_side")
    assert (
        "Nothing saturated on the destination doors at the knee: the limit is elsewhere, on the source side: "
        "data-rate limit of xrootd on door-src at 99 % (4.0 MB/s through xrootd against the 4 MB/s its door1.cfg "
        "allows) from concurrency 1." in verdict["headline"]
    ), verdict["headline"]


def test_a_source_full_only_past_the_knee_is_not_the_limit(door):
    """A free known-cause run: level from x1 (192, 157, 167, 202 MB/s), door1's cores full at x8
    only; it once read "the limit is elsewhere, on the source side ... from concurrency 8"."""
    source = Host.objects.create(name="door-src", sample_interval=1)
    src = endpoint("v-src", "mock://src.test/data/")
    src.hosts.set([source])
    run, summary = _run(door, [1, 2, 4, 8], [192e6, 157e6, 167e6, 202e6])
    for step in range(4):
        _samples(door, step, "cpu.percent", [40, 40])
        _samples(source, step, "proc.io_bps", [1e6, 1e6], "xrootd")
        _samples(source, step, "door.rate_limit_bps", [4e6 if step < 3 else 1.05e6] * 2, "door1.cfg")
    verdict = verdicts.run_verdict(run, summary, T0 + timedelta(seconds=40))
    assert verdict["status"] == "levelled" and verdict["knee"]["concurrency"] == 1
    assert verdicts.kind(verdict) == ("levelled", "elsewhere"), verdict["headline"]
    assert "source side" not in verdict["headline"]


def test_a_full_host_beside_a_door_held_by_its_own_quota_is_not_the_hosts_cpu(door):
    """The door waited for its quota, not for the host's cores: its quota is named even where the
    host's CPU read fuller (a known-cause run once named 'CPU (all cores) on door2 at 90 %')."""
    run, summary = _run(door, [1, 2, 4], [140e6, 142e6, 141e6])
    for step in range(3):
        _samples(door, step, "cpu.percent", [95, 95])
        _samples(door, step, "proc.cpu_percent", [9.5, 9.5], "xrootd")
        _samples(door, step, "proc.cpus_allowed", [0.1, 0.1], "xrootd")
        _samples(door, step, "proc.cpu_quota_cores", [0.1, 0.1], "xrootd")
        _samples(door, step, "proc.cpu_throttled_percent", [91, 91], "xrootd")
        _samples(door, step, "proc.cpu_wait_per_s", [0.3, 0.3], "xrootd")
    verdict = verdicts.run_verdict(run, summary, T0 + timedelta(seconds=30))
    b = verdict["bottleneck"]
    assert (b["resource"], b["label"]) == ("daemon_cpu", "xrootd") and b["title"].startswith("CPU quota"), verdict
    host_cpu = next(r for r in verdict["saturation"][0]["readings"] if r["resource"] == "cpu")
    assert not host_cpu["binding"] and "its own CPU quota" in host_cpu["detail"]

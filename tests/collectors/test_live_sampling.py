"""A host's collector samples every second while a run of the host is live (issue 43): a step of
20 s then has about 20 samples a door, where the host's own 5-s interval gave one or none to a
step of a few seconds."""

from __future__ import annotations

import itertools
import time

import pytest
from django.utils import timezone

from campaigns import runs
from campaigns.models import Run
from collectors import live
from collectors.models import MetricSample
from collectors.sampling import CollectorLoop
from tests.support.factories import campaign, endpoint

pytestmark = pytest.mark.django_db(transaction=True)


def run_over(host, side: str) -> Run:
    src, dst = endpoint("live-src", "mock://src.test/data/"), endpoint("live-dst", "mock://dst.test/data/")
    (src if side == "source" else dst).hosts.set([host])
    return runs.create_run(campaign("live", [src], [dst], file_count=4, concurrency_steps=[1]))


@pytest.mark.parametrize("side", ["source", "destination"])
def test_a_host_of_a_live_run_is_sampled_every_second_and_its_own_interval_after(make_host, side):
    host = make_host(sample_interval=5)
    other = make_host(sample_interval=5)
    run = run_over(host, side)
    assert live.interval_for(host) == 5.0  # pending: not live yet
    Run.objects.filter(pk=run.pk).update(state="running", started_at=timezone.now())
    assert live.interval_for(host) == 1.0 and live.interval_for(other) == 5.0
    Run.objects.filter(pk=run.pk).update(state="succeeded", finished_at=timezone.now())
    assert live.interval_for(host) == 5.0
    # A host that samples faster than the live interval keeps its own.
    fast = make_host(sample_interval=1)
    assert live.interval_for(fast) == 1.0


def test_the_collector_loop_ticks_each_second_while_the_run_is_live(make_host):
    host = make_host(sample_interval=5)
    run = run_over(host, "destination")
    Run.objects.filter(pk=run.pk).update(state="running", started_at=timezone.now())
    loop = CollectorLoop(host.name)
    loop.start()
    try:
        time.sleep(4.5)
        while_live = loop.ticks
        Run.objects.filter(pk=run.pk).update(state="succeeded", finished_at=timezone.now())
        time.sleep(1.2)  # the tick that sees the run ended
        after = loop.ticks
        time.sleep(4.0)
        quiet = loop.ticks - after
    finally:
        loop.stop()
        loop.join(10)
    assert while_live >= 4, while_live
    assert quiet <= 1, quiet
    stamps = sorted(MetricSample.objects.filter(host=host, metric="cpu.percent").values_list("time", flat=True))
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(stamps)][: while_live - 2]
    assert gaps and max(gaps) < 1.6, gaps


def test_a_run_that_begins_mid_interval_is_sampled_within_a_second(make_host):
    host = make_host(sample_interval=30)
    run = run_over(host, "destination")
    loop = CollectorLoop(host.name)
    loop.start()
    try:
        time.sleep(1.5)
        assert loop.ticks == 1  # the first tick; the next quiet one is 30 s away
        Run.objects.filter(pk=run.pk).update(state="running", started_at=timezone.now())
        time.sleep(2.5)
        assert loop.ticks >= 3, loop.ticks
    finally:
        loop.stop()
        loop.join(10)

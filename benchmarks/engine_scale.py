#!/usr/bin/env python3
"""Engine scale on PostgreSQL + Redis with a real worker process.

(a) bookkeeping: a mock run of 100,000 instant transfers (time=0), recorded transfers/s
    from the run's creation to the last record committed. Target >= 5,000/s.
(b) concurrency fidelity: 20,000 transfers of 1 s each (time=1) at concurrency 1,200,
    achieved transfers/s against Little's law's 1,200/s. Target >= 1,100/s, RSS < 1 GB.

    .venv/bin/python benchmarks/engine_scale.py [--files-a 100000] [--files-b 20000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import harness


def mock_run(name: str, files: int, dst_query: str, concurrency: int):
    from campaigns import runs
    from campaigns.models import Backend, Campaign, Endpoint

    stamp = f"{name}-{int(time.time())}"
    backend, _ = Backend.objects.get_or_create(name="bench-mock", defaults={"access_layer": "xrootd"})
    src = Endpoint.objects.create(name=f"{stamp}-src", backend=backend, url="mock://src.bench/data/")
    dst = Endpoint.objects.create(name=f"{stamp}-dst", backend=backend, url=f"mock://dst.bench/data/?{dst_query}")
    campaign = Campaign(
        name=stamp, file_count=files, file_size=1_000_000, concurrency_steps=[concurrency], checksum_mode="none"
    )
    campaign.save()
    campaign.sources.set([src])
    campaign.destinations.set([dst])
    return runs.start_run(campaign, trigger="command")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files-a", type=int, default=100_000)
    parser.add_argument("--concurrency-a", type=int, default=200)
    parser.add_argument("--files-b", type=int, default=20_000)
    parser.add_argument("--concurrency-b", type=int, default=1200)
    args = parser.parse_args()

    harness.setup()
    from campaigns.models import Run

    print(f"machine: {harness.machine()}")
    with tempfile.TemporaryDirectory() as tmp:
        worker = harness.start_worker("bench", Path(tmp))
        try:
            with harness.PeakRss(worker) as rss_a:
                run = mock_run("scale-a", args.files_a, "time=0", args.concurrency_a)
                harness.wait_for_run(run.pk, timeout=1800)
            run = Run.objects.get(pk=run.pk)
            elapsed = (run.finished_at - run.created).total_seconds()
            rate_a = run.files_done / elapsed
            print(
                f"(a) bookkeeping: {run.files_done:,} of {args.files_a:,} instant transfers recorded in "
                f"{elapsed:.1f} s -> {rate_a:,.0f} recorded transfers/s (target >= 5,000/s); "
                f"concurrency {args.concurrency_a}; worker peak RSS {rss_a.peak / 2**20:,.0f} MiB"
            )
        finally:
            worker.stop()
        # A fresh worker, so the peak RSS of (b) is its own.
        worker = harness.start_worker("bench-b", Path(tmp))
        try:
            with harness.PeakRss(worker) as rss_b:
                run = mock_run("scale-b", args.files_b, "time=1", args.concurrency_b)
                harness.wait_for_run(run.pk, timeout=1800)
            run = Run.objects.get(pk=run.pk)
            window = run.summary["total"]["window_seconds"]
            rate_b = run.files_done / window
            print(
                f"(b) fidelity: {run.files_done:,} of {args.files_b:,} one-second transfers at concurrency "
                f"{args.concurrency_b} in {window:.1f} s -> {rate_b:,.0f} transfers/s against the ideal "
                f"{args.concurrency_b:,}/s ({rate_b / args.concurrency_b:.1%}; target >= 1,100/s); "
                f"worker peak RSS {rss_b.peak / 2**20:,.0f} MiB (target < 1,024 MiB)"
            )
        finally:
            worker.stop()


if __name__ == "__main__":
    main()

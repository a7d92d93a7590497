#!/usr/bin/env python3
"""What bounds the driver's bookkeeping: its database statements timed alone, in one process.

The driver's cycle for each batch of copies is: claim queued rows (one UPDATE … RETURNING),
mark them started (one UPDATE from a JSON batch), record their results (one UPDATE from a JSON batch,
with the time buckets added by the same statement). This script plans a run of `--files`
transfers with COPY, then drives that cycle itself over the whole run in batches of
`--batch`, with no copy and no engine, and times each statement kind; then it records a
second run the same way without the buckets (the bare UPDATE), so the cost of writing the
buckets is a ratio measured in one sitting. Figures are transfers per second of each
statement alone.

    .venv/bin/python benchmarks/bookkeeping_profile.py [--files 100000] [--batch 200] [--analyze]
"""

from __future__ import annotations

import argparse
import os
import time
from collections import defaultdict

os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/storageops_bench_profile")

import harness

ANALYZE = False


def plan(files: int):
    from campaigns import runs
    from campaigns.models import Backend, Campaign, Endpoint
    from campaigns.runs import store
    from campaigns.runs.planning import PlannedTransfer

    stamp = f"profile-{time.time_ns()}"
    backend, _ = Backend.objects.get_or_create(name="bench-mock", defaults={"access_layer": "xrootd"})
    src = Endpoint.objects.create(name=f"{stamp}-src", backend=backend, url="mock://src.bench/data/")
    dst = Endpoint.objects.create(name=f"{stamp}-dst", backend=backend, url="mock://dst.bench/data/")
    campaign = Campaign(
        name=stamp, file_count=files, file_size=1_000_000, concurrency_steps=[200], checksum_mode="none"
    )
    campaign.save()
    campaign.sources.set([src])
    campaign.destinations.set([dst])
    run = runs.create_run(campaign, trigger="command")
    started = time.perf_counter()
    store.insert_plan(
        run.pk,
        (PlannedTransfer(i, f"mock://src.bench/data/{i}", f"mock://dst.bench/data/{i}", 1_000_000, src.pk, dst.pk)
         for i in range(files)),
    )  # fmt: skip
    if ANALYZE:
        # What the driver did after a large plan until its mark-started statement was made to go
        # by the primary key whatever the statistics (campaigns.runs.store).
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("ANALYZE campaigns_transfer")
    return run, time.perf_counter() - started


def drive(run, batch: int, record_sql: str) -> dict[str, float]:
    """The claim / mark started / record cycle over the whole run; seconds spent in each."""
    from django.db import connection

    from campaigns.runs import store
    from campaigns.runs.engines.copies import CopyResult

    spent: dict[str, float] = defaultdict(float)
    saved = store._RECORD_SQL_PG
    store._RECORD_SQL_PG = record_sql
    try:
        clock = time.time()
        while True:
            t = time.perf_counter()
            jobs = store.claim(run.pk, batch, 0, "profile")
            spent["claim"] += time.perf_counter() - t
            if not jobs:
                break
            t = time.perf_counter()
            store.mark_started(run.pk, "profile", [(j.id, clock) for j in jobs])
            spent["mark started"] += time.perf_counter() - t
            # Copies of 2 s, ending a little later each batch: a second of buckets every few batches.
            results = [CopyResult(job=j, ok=j.index % 97 != 13, started=clock, finished=clock + 2.0, duration=2.0,
                                  category="" if j.index % 97 != 13 else "http_5xx") for j in jobs]  # fmt: skip
            t = time.perf_counter()
            store.record(run.pk, results, retries=0, executor="profile")
            spent["record"] += time.perf_counter() - t
            clock += 0.05
    finally:
        store._RECORD_SQL_PG = saved
    connection.close()
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--analyze", action="store_true", help="ANALYZE the transfer table after each plan")
    args = parser.parse_args()
    global ANALYZE
    ANALYZE = args.analyze
    harness.setup()
    from campaigns.models import TransferBucket
    from campaigns.runs import store

    print(f"machine: {harness.machine()}")
    results = {}
    for label, sql in (("with buckets", store._RECORD_SQL_PG), ("without buckets", store._RECORD_UPDATE_PG)):
        run, planned = plan(args.files)
        spent = drive(run, args.batch, sql)
        results[label] = spent
        total = sum(spent.values())
        line = ", ".join(f"{k} {args.files / v:,.0f}/s ({v:.1f} s)" for k, v in spent.items())
        print(f"{label}: plan by COPY {args.files / planned:,.0f}/s; {line}; the cycle {args.files / total:,.0f}/s")
        if label == "with buckets":
            print(f"  buckets written: {TransferBucket.objects.filter(run=run).count():,}")
    ratio = results["with buckets"]["record"] / results["without buckets"]["record"]
    print(f"record with buckets / without: {ratio:.2f}x the time")


if __name__ == "__main__":
    main()

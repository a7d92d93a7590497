#!/usr/bin/env python3
"""The time and size of a report on a 1,000,000-transfer run.

The run is made as benchmarks/dashboard_load.py makes its runs (its `build`: rows bulk-generated
in PostgreSQL with INSERT ... SELECT FROM generate_series, buckets rebuilt from them, finalised
as the driver does, 5-second host samples of its two doors, a restart in its window), then given
its verdict and judgement (finalize.compute_summary, what the driver stores at a run's end).
The report is then built as the web view builds it (campaigns.reports: content, render) several
times, and printed to PDF once by Chromium; the transfer table is watched the whole time: the
report reads the scatter's bounded sample by key and nothing else of it.

    .venv/bin/python benchmarks/report_scale.py [--transfers 1000000] [--repeat 5] [--regenerate]

It uses a database of its own (storageops_bench_report), kept between runs: making and
finalising the run takes a few minutes, and is reused unless --regenerate.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ["DATABASE_URL"] = os.environ.get(
    "REPORT_BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/storageops_bench_report"
)
os.environ.setdefault("STORAGEOPS_VAR_DIR", tempfile.mkdtemp(prefix="report-scale-"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import dashboard_load  # its helpers make the run (its DATABASE_URL default is not taken: ours is set)
import harness

LIVE_ROWS = 1000  # dashboard_load's build always adds a live run; a small one here


def _the_run(transfers: int, regenerate: bool):
    from django.utils import timezone

    from campaigns.models import Run
    from campaigns.results import finalize
    from collectors.models import MetricSample

    found = None if regenerate else dashboard_load.existing_runs(transfers, 1)
    if found is None:
        Run.objects.filter(campaign__name=dashboard_load.CAMPAIGN).delete()
        MetricSample.objects.filter(host__name__endswith=".bench").delete()
        found = dashboard_load.build(transfers + LIVE_ROWS, LIVE_ROWS, 1)
    run = Run.objects.select_related("campaign").get(pk=found[0][0])
    if "verdict" not in (run.summary or {}):
        started = time.monotonic()
        summary = finalize.compute_summary(run, timezone.now())
        Run.objects.filter(pk=run.pk).update(summary=summary)
        run.refresh_from_db()
        print(f"run {run.pk}: verdict and judgement in {time.monotonic() - started:.1f} s", flush=True)
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--transfers", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--regenerate", action="store_true")
    args = parser.parse_args()

    harness.setup()
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from campaigns.models import Transfer
    from campaigns.reports import content, pdf, render

    print(f"machine: {harness.machine()}")
    run = _the_run(args.transfers, args.regenerate)
    rows = Transfer.objects.filter(run=run).count()
    user, _ = User.objects.get_or_create(username="report-bench")
    print(f"run {run.pk}: {rows:,} transfers, {len(run.summary['steps'])} steps")
    times, html = [], ""
    for _ in range(args.repeat):
        started = time.monotonic()
        with CaptureQueriesContext(connection) as queries:
            html = render.render_html(content.run_report(run, user))
        times.append(time.monotonic() - started)
    transfer_reads = [q["sql"] for q in queries.captured_queries if 'FROM "campaigns_transfer"' in q["sql"]]
    size = len(html.encode())
    print(f"HTML report: {size / 1e6:.2f} MB; built in p50 {statistics.median(times):.2f} s, "
          f"max {max(times):.2f} s over {args.repeat}; {len(queries.captured_queries)} queries, "
          f"{len(transfer_reads)} of them on the transfer table (the scatter's sample by key)")  # fmt: skip
    started = time.monotonic()
    try:
        printed = pdf.print_pdf(html)
    except pdf.PdfUnavailable as exc:
        print(f"PDF: not made ({exc})")
    else:
        print(f"PDF report: {len(printed) / 1e6:.2f} MB; printed in {time.monotonic() - started:.2f} s")


if __name__ == "__main__":
    main()

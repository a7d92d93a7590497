#!/usr/bin/env python3
"""StorageOps's FTS engine against a real FTS3 server, checked file by file against FTS's own
t_file rows and the doors' disks.

Scenarios (each one run of a campaign on the FTS engine, driven in this process):
  warmup  a sweep 1, 2, 4 with step_files 12 and measure_files 12: every step runs, with exactly
          24 files, and is measured at its target once FTS's optimizer put the link limit in force
  big     a sweep 1, 2, 4 of 64-MiB copies: each step's achieved concurrency within 10 % of its
          target, or the verdict's reason why not
  cancel  64-MiB copies at 4, cancelled with copies in flight: every record against t_file and the
          destination's disk, and the run page's counters

    .venv/bin/python benchmarks/fts_real_check.py --fts https://127.0.0.1:8446 \\
        --cert usercert.pem --key userkey.pem --ca ca.pem \\
        --source root://127.0.0.1:21094//data/so/ --destination root://127.0.0.1:21095//data/so/ \\
        --source-root /srv/xrd1 --destination-root /srv/xrd2 \\
        --mysql fts3:secret@127.0.0.1:3306/fts3 warmup big cancel

The doors' roots are their `oss.localroot` folders (a URL path /data/x lies at ROOT/data/x), read
here to hash the files; the FTS database is read to compare (MySQLdb). The identity needs a
delegated proxy on the FTS server and, for link management, FTS's config role.
"""

from __future__ import annotations

import argparse
import re
import threading
import time
import zlib
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

import harness

STATES = {"FINISHED": "succeeded", "FAILED": "failed", "CANCELED": "cancelled"}


def fts_rows(args, job_ids: list[str]) -> dict[int, dict]:
    import MySQLdb

    m = re.fullmatch(r"([^:]+):([^@]*)@([^:/]+):(\d+)/(\w+)", args.mysql)
    if not m:
        raise SystemExit("--mysql must be user:password@host:port/database")
    user, password, host, port, name = m.groups()
    db = MySQLdb.connect(host=host, port=int(port), user=user, passwd=password, db=name)
    try:
        cur = db.cursor(MySQLdb.cursors.DictCursor)
        rows: dict[int, dict] = {}
        for job_id in job_ids:
            cur.execute(
                "SELECT file_id, file_state, filesize, tx_duration, start_time, finish_time, reason "
                "FROM t_file WHERE job_id = %s",
                (job_id,),
            )
            rows.update({int(r["file_id"]): r for r in cur.fetchall()})
        return rows
    finally:
        db.close()


def on_disk(root: Path, url: str) -> Path:
    return root / urlsplit(url).path.lstrip("/")


def adler32(path: Path) -> str | None:
    try:
        value = 1
        with path.open("rb") as f:
            while chunk := f.read(1 << 22):
                value = zlib.adler32(chunk, value)
        return f"{value:08x}"
    except FileNotFoundError:
        return None


def make_campaign(args, name: str, **fields):
    from campaigns.models import Backend, Campaign, Endpoint
    from campaigns.runs.engines.fts.models import FtsInstance

    stamp = f"{name}-{int(time.time())}"
    backend, _ = Backend.objects.get_or_create(name="real-fts-doors", defaults={"access_layer": "xrootd"})
    src = Endpoint.objects.create(name=f"{stamp}-src", backend=backend, url=args.source)
    dst = Endpoint.objects.create(name=f"{stamp}-dst", backend=backend, url=args.destination)
    instance = FtsInstance.objects.create(
        name=stamp, url=args.fts, x509_cert=str(args.cert), x509_key=str(args.key), ca_path=str(args.ca),
        files_per_job=args.files_per_job, manage_link_limits=not args.no_link_limits, poll_seconds=1.0,
    )  # fmt: skip
    options = {"instance": instance.pk, **fields.pop("engine_options", {})}
    defaults = {"create_sources": True, "source_file_count": 4, "checksum_mode": "both", "timeout": 300}
    campaign = Campaign(name=stamp, engine="fts", engine_options=options, **{**defaults, **fields})
    campaign.full_clean()
    campaign.save()
    campaign.sources.set([src])
    campaign.destinations.set([dst])
    return campaign


def drive(campaign, cancel_when=None):
    """The run driven here; `cancel_when(run)` true cancels it (checked every 0.2 s)."""
    from django.db import connection

    from campaigns import runs
    from campaigns.models import Run
    from campaigns.runs.lifecycle import RunDriver

    run = runs.create_run(campaign, trigger="command")
    result: dict = {}

    def target() -> None:
        try:
            result["state"] = RunDriver(run.pk).drive()
        finally:
            connection.close()

    thread = threading.Thread(target=target, name="drive")
    thread.start()
    cancelled_at = None
    while thread.is_alive():
        thread.join(0.2)
        if cancel_when and cancelled_at is None and cancel_when(Run.objects.get(pk=run.pk)):
            cancelled_at = datetime.now(UTC)
            runs.request_cancel(Run.objects.get(pk=run.pk))
    return Run.objects.get(pk=run.pk), cancelled_at


def page_text(run) -> dict[str, str]:
    """The run page's rows (label -> text), as a signed-in viewer sees them."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    user, _ = get_user_model().objects.get_or_create(username="fts-real-check", defaults={"is_superuser": True})
    client = Client()
    client.force_login(user)
    from django.conf import settings
    from django.test.utils import override_settings

    # The page's static files by name: this check runs without collectstatic's manifest.
    plain = {**settings.STORAGES, "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}
    with override_settings(STORAGES=plain):
        html = client.get(run.get_absolute_url()).content.decode()
    rows = dict(re.findall(r"<dt>([^<]+)</dt>\s*<dd[^>]*>(.*?)</dd>", html, re.S))
    return {k.strip(): re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", v)).strip() for k, v in rows.items()}


def compare(args, run) -> list[str]:
    """Every transfer against FTS's t_file row and the destination's disk; the differences."""
    from campaigns.models import Transfer
    from campaigns.runs.engines.fts.store import with_ids

    transfers = list(with_ids(Transfer.objects).filter(run=run).order_by("index"))
    rows = fts_rows(args, sorted({t.fts_job_id for t in transfers if t.fts_job_id}))
    problems = []
    print(f"{'#':>3} {'step':>4} {'ours':<10} {'FTS':<9} {'bytes':>10} {'FTS size':>10} {'on disk':>10} "
          f"{'adler32 ok':<10} {'start (FTS)':<20} {'duration':>8} {'FTS tx':>7}")  # fmt: skip
    for t in transfers:
        if not t.fts_job_id and t.state == "skipped":
            continue  # never submitted: a file no step needed
        row = rows.get(t.fts_file_id) if t.fts_file_id else None
        dest = on_disk(args.destination_root, t.destination)
        disk_size = dest.stat().st_size if dest.exists() else None
        sum_ok = None
        if disk_size is not None:
            sum_ok = adler32(dest) == adler32(on_disk(args.source_root, t.source))
        fts_state = row["file_state"] if row else "-"
        step = "-" if t.step is None else t.step
        size = "-" if disk_size is None else disk_size
        row_of = row or {}
        print(
            f"{t.index:>3} {step:>4} {t.state:<10} {fts_state:<9} {t.bytes_transferred or 0:>10} "
            f"{row_of.get('filesize') or 0:>10} {size:>10} {sum_ok!s:<10} {row_of.get('start_time') or '-'!s:<20} "
            f"{'-' if t.duration is None else t.duration:>8} {row_of.get('tx_duration') or '-':>7}"
        )
        if row is None:
            if t.state not in ("skipped",):
                problems.append(f"#{t.index}: {t.state} but FTS has no row")
            continue
        whole = disk_size == t.size and sum_ok
        expected = STATES.get(row["file_state"], row["file_state"])
        if row["file_state"] == "CANCELED" and row["start_time"] is None:
            expected = "skipped"  # FTS cancelled it before starting it: it never ran
        if row["file_state"] == "CANCELED" and whole and t.state == "succeeded":
            expected = "succeeded"  # FTS's race: finished before its kill, whole on disk
        if t.state != expected:
            problems.append(f"#{t.index}: ours {t.state}, FTS {row['file_state']}, whole on disk {whole}")
        if t.state == "succeeded" and not whole:
            problems.append(f"#{t.index}: succeeded but the destination has {disk_size} bytes, adler32 ok {sum_ok}")
        if t.state == "succeeded" and t.bytes_transferred != t.size:
            problems.append(f"#{t.index}: succeeded with {t.bytes_transferred} bytes of {t.size}")
        if row["start_time"] and t.started_at:
            ours = t.started_at.astimezone(UTC).replace(tzinfo=None)
            if abs((ours - row["start_time"]).total_seconds()) > 1.0:
                problems.append(f"#{t.index}: started {ours}, FTS says {row['start_time']}")
    return problems


def steps_table(run) -> None:
    from campaigns.models import RunStep, Transfer
    from campaigns.results import readers

    summary = readers.stored(run) or {}
    by_step = {s["step"]: s for s in summary.get("steps", [])}
    for step in RunStep.objects.filter(run=run).order_by("index"):
        s = by_step.get(step.index, {})
        files = Transfer.objects.filter(run=run, step=step.index).count()
        print(
            f"  step {step.index} x{step.concurrency}: {files} files, achieved {s.get('achieved_mean')} "
            f"(max {s.get('achieved_max')}), warm-up {s.get('warmup_seconds')} s, "
            f"{(s.get('throughput_bps') or 0) / 1e6:.1f} MB/s, off target {s.get('off_target')}"
        )
    verdict = summary.get("verdict") or {}
    print(f"  verdict: {verdict.get('headline')}")


def report(args, name: str, run, cancelled_at=None) -> int:
    print(f"\n== {name}: run #{run.pk} {run.state} ({run.stop_reason})")
    if cancelled_at:
        print(f"  cancel requested at {cancelled_at:%H:%M:%S.%f}")
    steps_table(run)
    problems = compare(args, run)
    rows = page_text(run)
    print(f"  page: Files: {rows.get('Files')} | Success rate: {rows.get('Success rate')}")
    print(f"  {len(problems)} difference(s) from FTS's t_file and the disk" + (":" if problems else ""))
    for p in problems:
        print(f"    {p}")
    return len(problems)


def warmup(args) -> int:
    c = make_campaign(
        args, "real-warmup", file_count=120, file_size=10 * 1024 * 1024, concurrency_steps=[1, 2, 4],
        step_files=12, engine_options={"measure_files": 12},
    )  # fmt: skip
    run, _ = drive(c)
    from campaigns.models import Transfer

    wrong = report(args, "warmup", run)
    counts = [Transfer.objects.filter(run=run, step=i).count() for i in range(3)]
    print(f"  files per step: {counts} (planned 12 + measure_files 12 each)")
    return wrong + sum(n != 24 for n in counts)


def big(args) -> int:
    c = make_campaign(
        args, "real-64mib", file_count=36, file_size=64 * 1024 * 1024, concurrency_steps=[1, 2, 4],
        step_files=12,
    )  # fmt: skip
    run, _ = drive(c)
    return report(args, "64-MiB sweep", run)


def cancel(args) -> int:
    from campaigns.models import Transfer

    c = make_campaign(
        args, "real-cancel", file_count=30, file_size=64 * 1024 * 1024, concurrency_steps=[4], step_files=30,
    )  # fmt: skip

    def when(run) -> bool:
        done = Transfer.objects.filter(run=run, state="succeeded").count()
        return done >= 8 and run.active_transfers >= 1

    run, at = drive(c, cancel_when=when)
    return report(args, "cancel", run, at)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fts", required=True)
    parser.add_argument("--cert", type=Path, required=True)
    parser.add_argument("--key", type=Path, required=True)
    parser.add_argument("--ca", type=Path, required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--destination", required=True)
    parser.add_argument("--source-root", type=Path, required=True)
    parser.add_argument("--destination-root", type=Path, required=True)
    parser.add_argument("--mysql", required=True)
    parser.add_argument("--files-per-job", type=int, default=10)
    parser.add_argument("--no-link-limits", action="store_true", help="without FTS's config role")
    parser.add_argument("scenarios", nargs="+", choices=["warmup", "big", "cancel"])
    args = parser.parse_args()
    harness.setup()
    from django.test.utils import setup_test_environment

    setup_test_environment()  # the page is read through Django's test client
    print(harness.machine())
    wrong = sum({"warmup": warmup, "big": big, "cancel": cancel}[s](args) for s in args.scenarios)
    raise SystemExit(1 if wrong else 0)


if __name__ == "__main__":
    main()

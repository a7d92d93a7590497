#!/usr/bin/env python3
"""Memory of the web process while it streams the export of a 500,000-transfer run.

A run of N transfers (default 500,000; 2 % failed with a message) is generated straight in
PostgreSQL, a real gunicorn (one sync worker, as in the compose file) serves the API on a free
loopback port, and the run's export is downloaded as CSV and then as JSON through
`GET /api/v1/runs/<id>/export/?as=…` with an API token. While each download streams, the peak
RSS (VmHWM) of gunicorn's processes is read; the figure is its growth over the RSS the worker
had after a warm-up request. Every row is counted on the client side, so a truncated export
fails the benchmark. Target: growth < 100 MB.

    .venv/bin/python benchmarks/export_memory.py [--transfers 500000]
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

import harness

MB = 1000**2
TARGET_MB = 100


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def make_run(transfers: int):
    """A finished run with `transfers` rows, written by one INSERT … SELECT generate_series."""
    from django.db import connection

    from campaigns.models import Backend, Campaign, Endpoint, Run

    stamp = f"export-memory-{int(time.time())}-{os.getpid()}"
    backend, _ = Backend.objects.get_or_create(name="bench-export", defaults={"access_layer": "xrootd"})
    src = Endpoint.objects.create(name=f"{stamp}-src", backend=backend, url="root://127.0.0.1:1094//data/src/")
    dst = Endpoint.objects.create(name=f"{stamp}-dst", backend=backend, url="root://127.0.0.1:1095//data/dst/")
    campaign = Campaign.objects.create(name=stamp, file_count=transfers, file_size=1_000_000_000)
    campaign.sources.set([src])
    campaign.destinations.set([dst])
    run = Run.objects.create(campaign=campaign, state="succeeded", planned_files=transfers)
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO campaigns_transfer (
                run_id, index, step, source, destination, size, state, attempt, executor,
                started_at, finished_at, duration, bytes_transferred, throughput_bps,
                error_category, error_code, error_message, copy_mode, source_checksum,
                destination_checksum, source_endpoint_id, destination_endpoint_id)
            SELECT %(run)s, i, i %% 8,
                   'root://127.0.0.1:1094//data/src/storageops/source/1000000000/src-' || lpad(i::text, 7, '0'),
                   'root://127.0.0.1:1095//data/dst/storageops/runs/run-' || %(run)s || '/f' || lpad(i::text, 7, '0'),
                   1000000000,
                   CASE WHEN i %% 50 = 0 THEN 'failed' ELSE 'succeeded' END,
                   1, 'bench@host:1234',
                   now() - interval '1 day' + i * interval '100 ms',
                   now() - interval '1 day' + i * interval '100 ms' + interval '12.5 s',
                   12.5,
                   CASE WHEN i %% 50 = 0 THEN 0 ELSE 1000000000 END,
                   CASE WHEN i %% 50 = 0 THEN NULL ELSE 80000000.0 END,
                   CASE WHEN i %% 50 = 0 THEN 'checksum_timeout' ELSE '' END,
                   CASE WHEN i %% 50 = 0 THEN 110 ELSE NULL END,
                   CASE WHEN i %% 50 = 0 THEN 'SOURCE CHECKSUM Timed out waiting for the checksum of the source'
                        ELSE '' END,
                   '3rd pull', '0a1b2c3d', '0a1b2c3d', %(src)s, %(dst)s
            FROM generate_series(0, %(n)s - 1) AS i
            """,
            {"run": run.pk, "n": transfers, "src": src.pk, "dst": dst.pk},
        )
    return run


def rss_bytes(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    return 0


def group_max(process, field: str) -> int:
    best = 0
    for pid in process.group_pids():
        try:
            best = max(best, rss_bytes(pid, field))
        except OSError:
            continue
    return best


def reset_peaks(process) -> None:
    """Sets VmHWM back to the current RSS (Linux's clear_refs "5"), so each download's peak is its own."""
    for pid in process.group_pids():
        try:
            Path(f"/proc/{pid}/clear_refs").write_text("5")
        except OSError:
            continue


def download(url: str, token: str, kind: str) -> tuple[int, int, float]:
    """Streams the export, counting rows; returns (rows, bytes, seconds)."""
    import requests

    started = time.monotonic()
    rows = 0
    size = 0
    with requests.get(url, params={"as": kind}, headers={"Authorization": f"Token {token}"}, stream=True,
                      timeout=600) as response:  # fmt: skip
        response.raise_for_status()
        if kind == "csv":
            raw = _ResponseReader(response)
            for _ in csv.reader(io.TextIOWrapper(raw, encoding="utf-8", newline="")):
                rows += 1
            rows -= 1  # the header
            size = raw.received
        else:
            for chunk in response.iter_content(chunk_size=1 << 16):
                size += len(chunk)
                rows += chunk.count(b'{"index": ')
    return rows, size, time.monotonic() - started


class _ResponseReader(io.RawIOBase):
    """A readable file over a streaming response, so csv.reader parses as bytes arrive."""

    def __init__(self, response) -> None:
        self._chunks = response.iter_content(chunk_size=1 << 16)
        self._buffer = b""
        self.received = 0

    def readable(self) -> bool:
        return True

    def readinto(self, target) -> int:
        while not self._buffer:
            try:
                self._buffer = next(self._chunks)
                self.received += len(self._buffer)
            except StopIteration:
                return 0
        n = min(len(target), len(self._buffer))
        target[:n] = self._buffer[:n]
        self._buffer = self._buffer[n:]
        return n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--transfers", type=int, default=500_000)
    args = parser.parse_args()
    if args.transfers < 1:
        parser.error("--transfers must be at least 1")

    harness.setup()
    from django.contrib.auth.models import Group, User

    from devsite.processes import ManagedProcess
    from storageops import roles
    from storageops.api import tokens

    print(f"machine: {harness.machine()}")
    started = time.monotonic()
    run = make_run(args.transfers)
    print(f"generated run {run.pk} with {args.transfers:,} transfers in {time.monotonic() - started:.1f} s", flush=True)
    user, _ = User.objects.get_or_create(username="bench-export")
    user.groups.add(Group.objects.get(name=roles.VIEWER))
    token = tokens.create_token(user, f"export-memory-{run.pk}", roles.VIEWER)[1]

    port = free_port()
    logs = Path(tempfile.mkdtemp(prefix="export-memory-"))
    argv = [sys.executable, "-m", "gunicorn", "storageops.wsgi", "--bind", f"127.0.0.1:{port}", "--workers", "1",
            "--timeout", "600", "--access-logfile", "-"]  # fmt: skip
    web = ManagedProcess("gunicorn", argv, dict(os.environ), logs, cwd=harness.ROOT).start()
    failed = False
    try:
        base = f"http://127.0.0.1:{port}"
        import requests

        deadline = time.monotonic() + 60
        while True:
            try:
                if requests.get(f"{base}/healthz", timeout=2).status_code in (200, 503):
                    break
            except requests.ConnectionError:
                pass
            if time.monotonic() > deadline or web.returncode is not None:
                raise SystemExit(f"gunicorn did not answer: {web.log_text()[-2000:]}")
            time.sleep(0.3)
        url = f"{base}/api/v1/runs/{run.pk}/export/"
        # Warm-up: imports, the database connection, serializers: the worker's resting size.
        requests.get(f"{base}/api/v1/runs/{run.pk}/", headers={"Authorization": f"Token {token}"}, timeout=60)
        for kind in ("csv", "json"):
            reset_peaks(web)
            before = group_max(web, "VmRSS")
            rows, size, seconds = download(url, token, kind)
            peak = group_max(web, "VmHWM")
            growth = (peak - before) / MB
            ok = rows == args.transfers and growth < TARGET_MB
            failed |= not ok
            print(
                f"{kind}: {rows:,} rows, {size / MB:,.0f} MB in {seconds:.1f} s ({rows / seconds:,.0f} rows/s); "
                f"web worker RSS before {before / MB:,.0f} MB, peak {peak / MB:,.0f} MB -> growth {growth:,.1f} MB "
                f"(target < {TARGET_MB} MB: {'met' if growth < TARGET_MB else 'NOT met'})"
                + ("" if rows == args.transfers else f"; ROWS MISSING: expected {args.transfers:,}"),
                flush=True,
            )
    finally:
        web.stop()
        from campaigns.models import Run

        Run.objects.filter(pk=run.pk).delete()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

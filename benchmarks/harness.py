"""What the benchmarks share: a PostgreSQL + Redis set-up, real worker processes, peak RSS.

Benchmarks run against their own database (storageops_bench by default) so they never
touch a development or test database, and print their figures; docs/benchmarks.md
records them with the command and the machine.
"""

from __future__ import annotations

import os
import platform
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/storageops_bench")
os.environ.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "storageops.settings")
os.environ.setdefault("GFAL_PYTHONBIN", "/usr/bin/python3")
# Queues of our own: another session's workers on the same Redis must not take our tasks.
os.environ.setdefault("STORAGEOPS_QUEUE_PREFIX", f"bench-{os.getpid()}-")


def ensure_database() -> None:
    import psycopg

    url = os.environ["DATABASE_URL"]
    if not url.startswith("postgres"):
        raise SystemExit("benchmarks run on PostgreSQL: set DATABASE_URL=postgres://…")
    name = url.rsplit("/", 1)[1]
    admin_url = url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def stop_children_on_signals() -> None:
    """SIGTERM or SIGHUP stop this benchmark's workers and doors at once, then unwind it.

    Its children die with it anyway (devsite.processes: parent-death signal, group guard);
    this is for a polite stop, which must work even when the main thread hangs in a stuck
    copy: the children are stopped from a helper thread, then the main thread is interrupted
    (its ``finally`` blocks run), and if it does not end within 10 s the process exits.
    """
    from devsite import processes
    from devsite.xrootd_server import live_server_processes

    processes.stop_children_on_signals(extra=live_server_processes)


def setup() -> None:
    stop_children_on_signals()
    ensure_database()
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def machine() -> str:
    cpu = "?"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem = int(Path("/proc/meminfo").read_text().split()[1]) // 1024 // 1024
    return f"{platform.node()}: {os.cpu_count()} cores ({cpu}), {mem} GiB, Python {platform.python_version()}"


def start_worker(name: str, log_dir: Path, concurrency: int = 2, **env: str):
    from django.conf import settings

    from devsite.processes import ManagedProcess

    queues = f"{settings.STORAGEOPS_CONTROL_QUEUE},{settings.STORAGEOPS_TRANSFERS_QUEUE}"
    argv = [
        sys.executable, "-m", "celery", "-A", "storageops", "worker", "-Q", queues,
        "-c", str(concurrency), "-n", f"{name}@%h", "--without-mingle", "--without-gossip", "-l", "warning",
    ]  # fmt: skip
    worker = ManagedProcess(name, argv, {**os.environ, **env}, log_dir, cwd=ROOT).start()
    _wait_ready(worker)
    return worker


def _wait_ready(worker) -> None:
    from storageops.celery import app

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if app.control.ping(timeout=1.0):
            return
        if worker.returncode is not None:
            raise RuntimeError(worker.log_text()[-3000:])
    raise TimeoutError("the worker did not answer a ping in 60 s")


class PeakRss:
    """Samples VmHWM of every process of a worker's group while a benchmark runs."""

    def __init__(self, process) -> None:
        self.process = process
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._sample_once()
        self._stop.set()
        self._thread.join()

    def _sample_once(self) -> None:
        from devsite.processes import peak_rss_bytes

        for pid in self.process.group_pids():
            try:
                self.peak = max(self.peak, peak_rss_bytes(pid))
            except OSError:
                continue

    def _sample(self) -> None:
        while not self._stop.wait(0.5):
            self._sample_once()


def wait_for_run(run_id: int, timeout: float) -> None:
    from campaigns.models import Run

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not Run.objects.get(pk=run_id).is_live:
            return
        time.sleep(0.5)
    raise TimeoutError(f"run {run_id} still live after {timeout}s")

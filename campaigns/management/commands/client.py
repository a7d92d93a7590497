"""``manage.py client --host NAME``: the Celery worker of a client host of a client pool.

It consumes only ``{STORAGEOPS_QUEUE_PREFIX}client.NAME``, where a run's driver sends the
serve task of each run whose campaign names this host in its pool. Threads, not processes:
a serve task mostly waits on its copies, and a client may serve several runs at once (each
task keeps its own copy pool). The command replaces itself with the worker (exec), so the pid
a supervisor started is the worker's. Nothing listens on the host: the worker connects out
to the broker and the database, as a collector does.
"""

from __future__ import annotations

import os
import sys

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from collectors.choices import HostRole
from collectors.models import Host


class Command(BaseCommand):
    help = "Run a client of a client pool (a Celery worker on the queue client.NAME)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--host", required=True, help="the Host's name, as registered in StorageOps (role client)")
        parser.add_argument("--runs", type=int, default=4, help="runs it may serve at once (default 4)")
        parser.add_argument("--queue-prefix", default=None, help="override STORAGEOPS_QUEUE_PREFIX")
        parser.add_argument("--loglevel", default="info")

    def handle(self, *args, host: str, runs: int, queue_prefix: str | None, loglevel: str, **options) -> None:
        found = Host.objects.filter(name=host).first()
        if found is None:
            known = ", ".join(Host.objects.filter(role=HostRole.CLIENT).values_list("name", flat=True)[:20]) or "none"
            raise CommandError(f"Unknown host {host!r}: add it first, with role client (client hosts: {known}).")
        if found.role != HostRole.CLIENT:
            raise CommandError(f"Host {host!r} has role {found.role}: only a host with role client serves a pool.")
        if not 1 <= runs <= 64:
            raise CommandError("--runs must be between 1 and 64.")
        prefix = settings.STORAGEOPS_QUEUE_PREFIX if queue_prefix is None else queue_prefix
        queue = f"{prefix}{found.client_queue}"
        env = dict(os.environ, STORAGEOPS_QUEUE_PREFIX=prefix)
        argv = [
            sys.executable, "-m", "celery", "-A", "storageops", "worker", "-Q", queue, "-P", "threads",
            "-c", str(runs), "-n", f"client-{host}@%h", "--without-mingle", "--without-gossip", "-l", loglevel,
        ]  # fmt: skip
        self.stdout.write(f"client {host} on queue {queue}")
        self.stdout.flush()
        sys.stdout.flush()
        os.execve(sys.executable, argv, env)  # noqa: S606 -- an argument list, our own interpreter

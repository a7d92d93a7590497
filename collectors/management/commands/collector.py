"""``manage.py collector --host NAME``: the Celery worker that runs on a storage host.

It consumes only ``{STORAGEOPS_QUEUE_PREFIX}host.NAME`` with one process (host tests must
not compete with each other) and samples the host from a thread of the worker (see
collectors.tasks). The command replaces itself with the worker (exec), so the pid a
supervisor started is the worker's pid. Nothing listens on the host: the worker connects
out to the broker and the database.
"""

from __future__ import annotations

import os
import sys

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from collectors.models import Host
from collectors.tasks import COLLECTOR_HOST_ENV


class Command(BaseCommand):
    help = "Run the collector of one storage host (a Celery worker on the queue host.NAME)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--host", required=True, help="the Host's name, as registered in StorageOps")
        parser.add_argument("--queue-prefix", default=None, help="override STORAGEOPS_QUEUE_PREFIX")
        parser.add_argument("--loglevel", default="info")

    def handle(self, *args, host: str, queue_prefix: str | None, loglevel: str, **options) -> None:
        if not Host.objects.filter(name=host).exists():
            known = ", ".join(Host.objects.values_list("name", flat=True)[:20]) or "none"
            raise CommandError(f"Unknown host {host!r}: add it first (known hosts: {known}).")
        prefix = settings.STORAGEOPS_QUEUE_PREFIX if queue_prefix is None else queue_prefix
        env = dict(os.environ, **{COLLECTOR_HOST_ENV: host, "STORAGEOPS_QUEUE_PREFIX": prefix})
        argv = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "storageops",
            "worker",
            "-Q",
            f"{prefix}host.{host}",
            "-c",
            "1",
            "-n",
            f"collector-{host}@%h",
            "--without-mingle",
            "--without-gossip",
            "-l",
            loglevel,
        ]
        self.stdout.write(f"collector for {host} on queue {prefix}host.{host}")
        self.stdout.flush()
        sys.stdout.flush()
        os.execve(sys.executable, argv, env)  # noqa: S606 -- an argument list, our own interpreter

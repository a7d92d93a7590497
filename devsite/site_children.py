"""The command lines of a site's children (its two workers, beat, a host's collector, a pool client):
one place for `make run` (runsite) and the soak (benchmarks/soak.py), which starts the same
processes to kill them."""

from __future__ import annotations

import sys

from django.conf import settings

from devsite.xrootd_server import XRootDServer


def worker_argv(name: str = "runsite", concurrency: int = 2, loglevel: str = "info") -> list[str]:
    """The worker of the runs' drivers ("transfers"): each run holds one of its slots throughout."""
    return _celery_worker(settings.STORAGEOPS_TRANSFERS_QUEUE, concurrency, f"{name}@%h", loglevel)


def control_worker_argv(name: str = "runsite", concurrency: int = 2, loglevel: str = "info") -> list[str]:
    """The worker of "control" alone: beat's short tasks (silent collectors, stalls, scrapes),
    run starts and the outage watch, answered however many runs hold the other's slots."""
    return _celery_worker(settings.STORAGEOPS_CONTROL_QUEUE, concurrency, f"{name}-control@%h", loglevel)


def _celery_worker(queues: str, concurrency: int, node: str, loglevel: str) -> list[str]:
    return [sys.executable, "-m", "celery", "-A", "storageops", "worker", "-Q", queues,
            "-c", str(concurrency), "-l", loglevel, "-n", node]  # fmt: skip


def beat_argv(loglevel: str = "info") -> list[str]:
    schedule = str(settings.VAR_DIR / "celerybeat-schedule")
    return [sys.executable, "-m", "celery", "-A", "storageops", "beat", "-l", loglevel, "-s", schedule]


def collector_argv(host: str) -> list[str]:
    return [sys.executable, "manage.py", "collector", "--host", host, "--loglevel", "warning"]


def client_argv(client: str, runs: int = 2) -> list[str]:
    return [sys.executable, "manage.py", "client", "--host", client, "--runs", str(runs), "--loglevel", "warning"]


def door_restart(server: XRootDServer):
    """Start a dead door again on its port with its config: a new daemon, whose pid file the
    door's collector watches, so the change log shows the restart as a real site's would."""

    def restart():
        server.start()
        return server.process

    return restart


def door_watches(server: XRootDServer) -> dict:
    """What a demo door's collector watches: its config, its daemon, its data folder's room, its log."""
    return {
        "watched_files": [str(server.config_path)],
        "watched_services": [{"name": "xrootd", "pidfile": str(server.xrootd_pidfile)}],
        "watched_filesystems": [str(server.data_dir)],
        "log_files": [{"path": str(server.log_path)}],
    }

"""Celery tasks of the collectors app: thin wrappers around the collector services.

A collector worker (``manage.py collector --host NAME``) consumes only its host's queue and
runs the sampling loop in a thread of its main process (started on ``worker_ready``).
"""

from __future__ import annotations

import logging
import os

from celery import shared_task
from celery.exceptions import WorkerLostError
from celery.signals import task_failure, worker_ready, worker_shutdown, worker_shutting_down
from django.conf import settings
from django.db import connection

from collectors import hosttest_series, hosttests, node_exporter, outages, worker_lives
from collectors.models import Host

log = logging.getLogger(__name__)
# Set by the collector command for the worker it starts; other workers leave it unset.
COLLECTOR_HOST_ENV = "STORAGEOPS_COLLECTOR_HOST"
_loop = None


def host_queue(host: Host | str) -> str:
    """The queue of a host's collector, with this deployment's prefix."""
    name = host.name if isinstance(host, Host) else host
    return f"{settings.STORAGEOPS_QUEUE_PREFIX}host.{name}"


@shared_task(
    name="collectors.host.run_test", soft_time_limit=hosttests.MAX_RUNTIME + 300, time_limit=hosttests.MAX_RUNTIME + 600
)
def run_host_test(host_name: str, params: dict) -> dict:
    # Validated again here, on the host: the queue is not a trust boundary.
    return hosttests.run_host_test(Host.objects.get(name=host_name), params)


@shared_task(name="collectors.host.run_test_series")
def run_host_test_series(series_id: int) -> str:
    # No time limit: a series of 50,000 repeats runs for days; it checks for a cancel each repeat.
    return hosttest_series.run(series_id).state


def start_host_test_series(host: Host, params: dict, user=None):
    """Record a series (validated on the control side: fail fast) and send it to the host's collector."""
    series = hosttest_series.create(host, params, user)
    run_host_test_series.apply_async(args=[series.pk], queue=host_queue(host))
    return series


def start_host_test(host: Host, params: dict):
    """Validate on the control side (fail fast for the operator) and send to the host's collector."""
    hosttests.validate_params(params)
    return run_host_test.apply_async(args=[host.name, params], queue=host_queue(host))


@shared_task(name="collectors.node_exporter.scrape", soft_time_limit=60, time_limit=90)
def scrape_node_exporters() -> dict:
    return node_exporter.scrape_all()


@worker_ready.connect
def _start_collector_loop(sender=None, **kwargs) -> None:
    global _loop
    host_name = os.environ.get(COLLECTOR_HOST_ENV)
    if not host_name or _loop is not None:
        return
    from collectors.sampling import CollectorLoop

    _loop = CollectorLoop(host_name)
    _loop.start()
    log.info("collector loop for host %s started", host_name)


@worker_ready.connect
def _start_outage_watch(sender=None, **kwargs) -> None:
    # In the site's main worker only (the one on the control queue), not in every collector
    # and pool client: one watcher sees an outage once.
    queues = getattr(getattr(getattr(sender, "app", None), "amqp", None), "queues", None)
    consumed = set(getattr(queues, "consume_from", None) or ())
    if settings.STORAGEOPS_CONTROL_QUEUE in consumed and not os.environ.get(COLLECTOR_HOST_ENV):
        outages.start_watch()
        log.warning("outage watch started (broker and database probed every %.0f s)", outages.INTERVAL)


@worker_ready.connect
def _record_worker_life(sender=None, **kwargs) -> None:
    # Every worker (the site's, a collector, a pool client): any may be killed outright.
    node = getattr(sender, "hostname", None)
    if node:
        try:
            worker_lives.started(node)
        finally:
            # The main process holds no connection otherwise: one left open here would sit idle
            # on the database for the worker's whole life.
            connection.close()
        worker_lives.start_beating(node)


@worker_shutdown.connect
def _end_worker_life(sender=None, **kwargs) -> None:
    node = getattr(sender, "hostname", None)
    if node:
        worker_lives.stopped(node)


@task_failure.connect
def _pool_process_lost(sender=None, task_id=None, exception=None, **kwargs) -> None:
    if isinstance(exception, WorkerLostError):
        # Told in the main process, which holds no connection otherwise (see _record_worker_life).
        try:
            worker_lives.pool_process_lost(getattr(sender, "name", "?"), task_id or "?", exception)
        finally:
            connection.close()


@worker_shutting_down.connect
def _stop_collector_loop(sender=None, **kwargs) -> None:
    # As soon as shutdown starts (not at its end), so no tick begins against a closing world.
    outages.stop_watch()
    if _loop is not None:
        _loop.stop()
        _loop.join(timeout=10)

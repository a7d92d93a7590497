"""Gunicorn settings for the dashboard and the API: `gunicorn -c python:storageops.gunicorn_conf`.

Sized for the machine it runs on (docs/benchmarks.md, "Per-request cost against the reference"):
a request is mostly Python with a few short queries between, so a process per core keeps the
cores busy, and one more covers the moments a process waits on PostgreSQL. Two threads each:
a long request (a PDF report, a streamed export) does not hold a whole process, while under
saturation two threads contend for the interpreter lock far less than four did (twenty
closed-loop clients: 258 requests/s with 3 x 2 against 235-315 with 3 x 4, p95 145 against
136-250 ms, the same machine and code). Each of these is an environment variable for sites that
measure otherwise.
"""

from __future__ import annotations

import os

from storageops.env import env_int, env_str

_cores = os.cpu_count() or 1

bind = env_str("STORAGEOPS_WEB_BIND", "0.0.0.0:8000")
workers = env_int("STORAGEOPS_WEB_WORKERS", _cores + 1, minimum=1)
worker_class = env_str("STORAGEOPS_WEB_WORKER_CLASS", "gthread")
threads = env_int("STORAGEOPS_WEB_THREADS", 2, minimum=1)
# No keep-alive by default: each answer closes its connection, and the next request goes to the
# process that takes it first, the least busy. A kept-alive connection stays with the process that
# accepted it, and one Python process uses at most one core: twenty closed-loop clients shared
# among three processes by the luck of their first connect left the site using 1-1.5 of the two
# cores in two windows of three (0.98 / 1.38 / 1.11 of the reference's requests/s); without
# keep-alive every window used both (docs/benchmarks.md). A connect on the site's own network costs
# far less than that; a proxy in front (nginx) keeps the browsers' connections alive itself.
keepalive = env_int("STORAGEOPS_WEB_KEEPALIVE", 0, minimum=0)
timeout = env_int("STORAGEOPS_WEB_TIMEOUT", 60, minimum=1)
graceful_timeout = env_int("STORAGEOPS_WEB_GRACEFUL_TIMEOUT", 30, minimum=1)
# A process that slowly grows (a leak in a library) is replaced, never all at once.
max_requests = 5000
max_requests_jitter = 500
accesslog = os.environ.get("STORAGEOPS_WEB_ACCESS_LOG", "-") or None  # "": no access log


def post_worker_init(worker) -> None:
    """The worker's app is loaded: import the views and freeze the start-up heap (storageops.warm)."""
    from storageops.warm import warm_process

    worker.log.info("warmed: %d start-up objects frozen out of the garbage collector", warm_process())

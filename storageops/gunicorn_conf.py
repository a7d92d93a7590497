"""Gunicorn settings for the dashboard and the API: `gunicorn -c python:storageops.gunicorn_conf`.

Sized for the machine it runs on (docs/benchmarks.md, "Twenty people at once"): a request is
mostly Python (templates, JSON) with a few short queries between, so a process per core keeps
the cores busy and a few threads in each fill the waits on PostgreSQL and Redis. One more
process than cores covers the moments a process is rendering while another waits. Each of
these is an environment variable for sites that measure otherwise.
"""

from __future__ import annotations

import os

from storageops.env import env_int, env_str

_cores = os.cpu_count() or 1

bind = env_str("STORAGEOPS_WEB_BIND", "0.0.0.0:8000")
workers = env_int("STORAGEOPS_WEB_WORKERS", _cores + 1, minimum=1)
worker_class = env_str("STORAGEOPS_WEB_WORKER_CLASS", "gthread")
threads = env_int("STORAGEOPS_WEB_THREADS", 4, minimum=1)
# Pages poll every 2-5 s: a kept-alive connection saves a handshake on each.
keepalive = 5
timeout = env_int("STORAGEOPS_WEB_TIMEOUT", 60, minimum=1)
graceful_timeout = env_int("STORAGEOPS_WEB_GRACEFUL_TIMEOUT", 30, minimum=1)
# A process that slowly grows (a leak in a library) is replaced, never all at once.
max_requests = 5000
max_requests_jitter = 500
accesslog = os.environ.get("STORAGEOPS_WEB_ACCESS_LOG", "-") or None  # "": no access log

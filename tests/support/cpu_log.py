"""A pytest plugin that writes what each test cost: `-p tests.support.cpu_log` with
STORAGEOPS_TEST_CPU_LOG=<path> (each xdist worker appends to <path>.<worker id>).

One JSON line per test: its node id, wall seconds, and the CPU seconds of the test process and
of the children it reaped meanwhile (Celery workers, XRootD doors, gunicorn, browsers: reaped
when the test stops them, with their own children). CI's budget is CPU on two cores, shared by
six test processes, so a test's wall time says little of what it costs the others;
`python -m benchmarks.test_costs <path>` ranks the files by CPU (docs/benchmarks.md).
"""

from __future__ import annotations

import json
import os
import resource
import time

import pytest


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem):
    path = os.environ.get("STORAGEOPS_TEST_CPU_LOG")
    if not path:
        yield
        return
    wall, own, reaped = time.monotonic(), _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
    yield
    line = {
        "test": item.nodeid,
        "wall": round(time.monotonic() - wall, 2),
        "cpu_self": round(_cpu(resource.RUSAGE_SELF) - own, 2),
        "cpu_children": round(_cpu(resource.RUSAGE_CHILDREN) - reaped, 2),
    }
    with open(f"{path}.{os.environ.get('PYTEST_XDIST_WORKER', 'main')}", "a") as log:
        log.write(json.dumps(line) + "\n")

"""Host metrics as chart series: averaged per time bucket in SQL, never row by row in Python.

A metric with several labels at one time (one value per network interface or disk) is
summed over the labels first, so "net.rx_bps" is the host's total; the loopback interface
is left out since it moves no data off the host.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime

from django.db import connection

from collectors.models import Host

# What the run and host pages draw, with the unit of each.
CHART_METRICS = {
    "cpu.percent": "%",
    "load1": "",
    "net.rx_bps": "B/s",
    "net.tx_bps": "B/s",
    "mem.used": "B",
}

_SQL = """
SELECT host_id, metric, floor(extract(epoch FROM time) / %(w)s)::bigint AS k,
       sum(value) / count(DISTINCT time) AS v
FROM collectors_metricsample
WHERE host_id = ANY(%(hosts)s) AND metric = ANY(%(metrics)s)
  AND time >= %(start)s AND time <= %(end)s AND label <> 'lo'
GROUP BY 1, 2, 3
ORDER BY 1, 2, 3
"""


def host_series(
    host_ids: Iterable[int], start: datetime, end: datetime, width: int, metrics: Iterable[str] = CHART_METRICS
) -> dict[str, dict[str, list[list[float]]]]:
    """{metric: {host name: [[epoch ms, value], ...]}} over [start, end] in `width`-second buckets."""
    host_ids = list(host_ids)
    if not host_ids:
        return {}
    names = dict(Host.objects.filter(pk__in=host_ids).values_list("pk", "name"))
    params = {"w": width, "hosts": host_ids, "metrics": list(metrics), "start": start, "end": end}
    rows = _rows_sql(params)
    out: dict[str, dict[str, list[list[float]]]] = defaultdict(lambda: defaultdict(list))
    for host_id, metric, k, value in rows:
        # The bucket's middle: a mean over the bucket belongs there.
        out[metric][names.get(host_id, str(host_id))].append([(k + 0.5) * width * 1000, value])
    return {metric: dict(series) for metric, series in out.items()}


def _rows_sql(params: dict) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(_SQL, params)
        return cursor.fetchall()


# Per label (a daemon, a disk, a log pattern), not summed over labels: a host's two disks are
# two curves, each out of 100 %. Counters (log matches) are summed over a bucket, gauges averaged.
LABELLED_METRICS = {
    "proc.cpu_percent": "%",
    "proc.cpus_allowed": "",
    "proc.cpu_quota_cores": "",
    "proc.cpu_throttled_percent": "%",
    "proc.cpu_throttled_per_s": "",
    "proc.io_bps": "B/s",
    "proc.cpu_wait_per_s": "",
    "door.rate_limit_bps": "B/s",
    "disk.busy_percent": "%",
    "disk.read_bps": "B/s",
    "disk.write_bps": "B/s",
    "log.matches": "",
    "fs.free_bytes": "B",
    "fs.size_bytes": "B",
}
SUMMED = ("log.matches",)

_LABELLED_SQL = """
SELECT host_id, metric, label, floor(extract(epoch FROM time) / %(w)s)::bigint AS k,
       CASE WHEN metric = ANY(%(summed)s) THEN sum(value) ELSE avg(value) END AS v
FROM collectors_metricsample
WHERE host_id = ANY(%(hosts)s) AND metric = ANY(%(metrics)s)
  AND time >= %(start)s AND time <= %(end)s
GROUP BY 1, 2, 3, 4
ORDER BY 1, 2, 3, 4
"""


def labelled_series(
    host_ids: Iterable[int],
    start: datetime,
    end: datetime,
    width: int,
    metrics: Iterable[str] = LABELLED_METRICS,
    with_host: bool = True,
) -> dict[str, dict[str, list[list[float]]]]:
    """{metric: {"door1 xrootd" (or "xrootd" without the host): [[epoch ms, value], ...]}}."""
    host_ids = list(host_ids)
    if not host_ids:
        return {}
    names = dict(Host.objects.filter(pk__in=host_ids).values_list("pk", "name"))
    params = {
        "w": width,
        "hosts": host_ids,
        "metrics": list(metrics),
        "start": start,
        "end": end,
        "summed": list(SUMMED),
    }
    with connection.cursor() as cursor:
        cursor.execute(_LABELLED_SQL, params)
        rows = cursor.fetchall()
    out: dict[str, dict[str, list[list[float]]]] = defaultdict(lambda: defaultdict(list))
    for host_id, metric, label, k, value in rows:
        host = names.get(host_id, str(host_id))
        name = f"{host} {label}".strip() if with_host else (label or host)
        out[metric][name].append([(k + 0.5) * width * 1000, value])
    return {metric: dict(series) for metric, series in out.items()}

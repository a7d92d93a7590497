"""Scraping hosts' node_exporter from the control side, stored under the collector's metric names.

For hosts where StorageOps may not run a collector, Prometheus' node_exporter is enough: a
beat task scrapes each ``Host.node_exporter_url`` and stores the same metrics (cpu.percent,
load1, mem.used, net.rx_bps …) so charts do not care where a sample came from.

Rates need the previous scrape's counters. They are kept in the memory of the worker process
that scraped (no model, no cache server needed); each rate is computed over the real time
between the two scrapes, so when a pool of several processes takes turns the rates are still
right, just averaged over a longer window. A previous scrape older than ``MAX_GAP`` is not used.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from dataclasses import dataclass

import requests
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from collectors.models import Host, MetricSample

log = logging.getLogger(__name__)
TIMEOUT = 5.0  # seconds; a scrape must never hold up the others for long
MAX_GAP = 300.0
_DISK_COUNTERS = {
    "node_disk_reads_completed_total": 0,
    "node_disk_read_bytes_total": 1,
    "node_disk_writes_completed_total": 2,
    "node_disk_written_bytes_total": 3,
}
_SKIP_DEVICE_PREFIXES = ("loop", "ram", "zram")


@dataclass
class Scrape:
    at: float  # monotonic time
    gauges: dict[str, float]
    cpu: tuple[float, float]  # busy, total seconds
    net: dict[str, tuple[float, float]]
    disk: dict[str, list[float]]


def parse(text: str) -> Scrape:
    """The counters and gauges we use, from node_exporter's text exposition format."""
    gauges: dict[str, float] = {}
    busy = total = 0.0
    net: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    disk: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            name, labels, value = s.name, s.labels, s.value
            if name == "node_cpu_seconds_total":
                total += value
                # same definition as the collector: idle and iowait are not busy
                if labels.get("mode") not in ("idle", "iowait"):
                    busy += value
            elif name in ("node_load1", "node_load5", "node_load15"):
                gauges[name.removeprefix("node_")] = value
            elif name.startswith("node_memory_") and name.endswith("_bytes"):
                gauges[name] = value
            elif name in ("node_network_receive_bytes_total", "node_network_transmit_bytes_total"):
                if labels.get("device") != "lo":
                    net[labels["device"]][0 if "receive" in name else 1] = value
            elif name in _DISK_COUNTERS and not labels.get("device", "").startswith(_SKIP_DEVICE_PREFIXES):
                disk[labels["device"]][_DISK_COUNTERS[name]] = value
    return Scrape(time.monotonic(), gauges, (busy, total), {k: (v[0], v[1]) for k, v in net.items()}, dict(disk))


_previous: dict[int, Scrape] = {}


def to_samples(host: Host, scrape: Scrape, previous: Scrape | None, now) -> list[MetricSample]:
    out: list[MetricSample] = []

    def add(metric: str, value: float, label: str = "") -> None:
        out.append(MetricSample(host=host, metric=metric, label=label[:64], time=now, value=float(value)))

    g = scrape.gauges
    for name in ("load1", "load5", "load15"):
        if name in g:
            add(name, g[name])
    if "node_memory_MemTotal_bytes" in g:
        cached = sum(g.get(f"node_memory_{k}_bytes", 0.0) for k in ("Buffers", "Cached", "SReclaimable"))
        add("mem.used", max(g["node_memory_MemTotal_bytes"] - g.get("node_memory_MemFree_bytes", 0.0) - cached, 0))
        add("mem.cached", cached)
        add("mem.total", g["node_memory_MemTotal_bytes"])
    if previous is None:
        return out
    seconds = scrape.at - previous.at
    if not 0 < seconds <= MAX_GAP:
        return out

    def rate(new: float, old: float) -> float:
        return max(new - old, 0.0) / seconds

    d_total = scrape.cpu[1] - previous.cpu[1]
    if d_total > 0:
        add("cpu.percent", min(max((scrape.cpu[0] - previous.cpu[0]) / d_total * 100, 0.0), 100.0))
    for iface, (rx, tx) in scrape.net.items():
        if iface in previous.net:
            add("net.rx_bps", rate(rx, previous.net[iface][0]), iface)
            add("net.tx_bps", rate(tx, previous.net[iface][1]), iface)
    for dev, values in scrape.disk.items():
        if dev in previous.disk:
            old = previous.disk[dev]
            add("disk.read_iops", rate(values[0], old[0]), dev)
            add("disk.read_bps", rate(values[1], old[1]), dev)
            add("disk.write_iops", rate(values[2], old[2]), dev)
            add("disk.write_bps", rate(values[3], old[3]), dev)
    return out


def scrape_host(host: Host, session: requests.Session | None = None) -> int:
    """Scrape one host and store its samples; returns how many were stored."""
    response = (session or requests).get(host.node_exporter_url, timeout=TIMEOUT)
    response.raise_for_status()
    scrape = parse(response.text)
    now = timezone.now()
    samples = to_samples(host, scrape, _previous.get(host.pk), now)
    _previous[host.pk] = scrape
    MetricSample.objects.bulk_create(samples)
    return len(samples)


def scrape_all() -> dict[str, int | str]:
    """Every host with a node_exporter URL; one host's failure does not stop the others."""
    results: dict[str, int | str] = {}
    with requests.Session() as session:
        for host in Host.objects.exclude(node_exporter_url=""):
            try:
                results[host.name] = scrape_host(host, session)
            except (requests.RequestException, ValueError) as exc:
                log.warning("node_exporter of %s: %s", host.name, exc)
                results[host.name] = f"error: {exc}"
    return results

"""The host page's charts, each declared once (storageops.charts): one document, the host's
metrics over the page's range (`collectors:host_metrics`), read by every chart."""

from __future__ import annotations

from django.urls import reverse

from storageops.charts import Chart, bind


def _metric(name: str, title: str, note: str, label: str, metric: str, unit: str, axis: str) -> Chart:
    return Chart(name, title, note, label, draw="host-metric", reads=("host",),
                 options=(("metric", metric), ("unit", unit), ("title", axis)))  # fmt: skip


def _labelled(name: str, title: str, note: str, label: str, options: tuple[tuple[str, str], ...]) -> Chart:
    return Chart(name, title, note, label, draw="host-labelled", reads=("host",), options=options)


HOST_CHARTS = (
    _metric("cpu", "CPU", "busy % of the whole machine", "CPU percent over time", "cpu.percent", "%", "CPU busy (%)"),
    _metric("load", "Load", "1-minute load average", "Load average over time", "load1", "", "load average (1 min)"),
    _metric("network", "Network", "received and sent, loopback left out", "Network bytes per second over time",
            "net.rx_bps,net.tx_bps", "B/s", "network (bytes/s)"),
    _metric("memory", "Memory", "used, page cache apart", "Memory used over time", "mem.used", "B",
            "memory used (bytes)"),
    _labelled("daemon-cpu", "Daemon CPU",
              "each watched daemon's own CPU (100 % = one core), dashed: the cores or quota it may use",
              "Each watched daemon's CPU over time against the CPU it may use",
              (("labelled", "proc.cpu_percent"), ("limit", "proc.cpus_allowed"), ("unit", "%"),
               ("title", "daemon CPU (% of one core)"))),
    _labelled("disk-busy", "Disk busy", "% of the time each device had I/O in flight",
              "Busy percent of each disk over time",
              (("labelled", "disk.busy_percent"), ("unit", "%"), ("title", "disk busy (%)"))),
    _labelled("disk-throughput", "Disk throughput", "read and written, per device",
              "Bytes read and written per second of each disk over time",
              (("labelled", "disk.read_bps,disk.write_bps"), ("unit", "B/s"), ("title", "disk (bytes/s)"))),
    _labelled("free-space", "Free space", "room left on each watched data folder's filesystem, dashed: its size",
              "Free space of each watched filesystem over time",
              (("labelled", "fs.free_bytes"), ("limit", "fs.size_bytes"), ("unit", "B"), ("title", "free (bytes)"))),
    _labelled("logs", "Log patterns",
              'matching lines in the watched logs, per chart bucket (e.g. checksum errors, timeouts, "Tx ring full")',
              "Log lines matching each pattern over time",
              (("labelled", "log.matches"), ("unit", ""), ("title", "matching lines"))),
)  # fmt: skip


def host_page(host_pk: int, query: str) -> list[Chart]:
    """The host page's charts, reading the host's metrics over the page's range (`query`)."""
    return bind(HOST_CHARTS, {}, {"host": f"{reverse('collectors:host_metrics', args=[host_pk])}?{query}"})

"""What a verdict's bottleneck rests on: the door, its metrics, the step's window, the samples."""

from __future__ import annotations

from typing import Protocol

from collectors.models import Host


class Reading(Protocol):
    """What of verdicts.Reading the evidence needs."""

    door: str
    resource: str
    label: str


# The metrics a resource's reading is computed from, as the collectors store them.
EVIDENCE_METRICS = {
    "cpu": ["cpu.percent"],
    "daemon_cpu": ["proc.cpu_percent", "proc.cpus_allowed", "proc.cpu_quota_cores"],
    "cores": ["proc.cores_busy_percent", "proc.cpu_percent"],
    "network": ["net.rx_bps", "net.tx_bps"],
    "disk": ["disk.busy_percent"],
    "memory": ["mem.used", "mem.total"],
}


def evidence(reading: Reading, step: dict) -> dict:
    """Where a bottleneck can be seen: which host's samples, of which metrics, over which window
    (the run page links it to the host's charts over exactly that window)."""
    return {
        "door": reading.door,
        "host_id": Host.objects.filter(name=reading.door).values_list("pk", flat=True).first(),
        "metrics": EVIDENCE_METRICS[reading.resource],
        "label": reading.label,
        "from": step["window"][0],
        "to": step["window"][1],
        "samples": step["samples"].get(reading.door, 0),
    }

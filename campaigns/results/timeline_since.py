"""A live timeline from a viewer's last point on: what a poll of the run page needs to add.

A viewer's page already holds the timeline up to its last bucket; each poll asks with
`since` (that bucket's time) and `bucket` (the width it holds) and is sent the buckets from that
time on -- the last one again, as a live bucket still fills. When the width is no longer the
viewer's (a growing run is shown in wider buckets), the whole document is sent: the viewer's
points no longer fit the axis. static/js/charts.js merges the answer into what it holds.
"""

from __future__ import annotations

import bisect

# The timeline's lists with one value per bucket ("doors" holds one such list per door).
_ALIGNED = ("total", "rolling", "active", "failures")


def after(doc: dict, since: float, bucket: float | None) -> dict:
    """`doc` (charts.compute_timeline's) from the bucket at `since` on, marked with `since`."""
    times = doc.get("times") or []
    if doc.get("bucket_seconds") is None or bucket != doc["bucket_seconds"]:
        return doc
    start = bisect.bisect_left(times, since)
    part = {**doc, "since": since, "times": times[start:]}
    part["doors"] = {name: values[start:] for name, values in (doc.get("doors") or {}).items()}
    for name in _ALIGNED:
        if name in doc:
            part[name] = doc[name][start:]
    return part

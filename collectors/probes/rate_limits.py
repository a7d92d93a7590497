"""Data-rate limits a door's own configuration sets, read from the host's watched config files.

A door capped by its configuration (XRootD's throttle plugin: `throttle.throttle data <bytes/s>`)
levels a sweep off with its CPU idle; the verdict can name that cap only if it knows it. The
collector already reads each watched file every tick for changes; this reads the limits out of
the same text, so a changed throttle is a new limit from the next tick on.
"""

from __future__ import annotations

import re
from pathlib import PurePath

# XrdThrottle: "throttle.throttle data 8000000 concurrency 1000" (either order of the options).
_XRD_THROTTLE = re.compile(r"^\s*throttle\.throttle\b(?P<options>.*)$", re.MULTILINE)
_DATA = re.compile(r"\bdata\s+(?P<bytes>\d+)\b")


def rate_limits(texts: dict[str, str | None]) -> dict[str, float]:
    """{config file's name: bytes a second} for every watched file that caps the data rate."""
    found: dict[str, float] = {}
    for path, text in texts.items():
        if not text:
            continue
        for line in _XRD_THROTTLE.finditer(text):
            if (data := _DATA.search(line["options"])) and int(data["bytes"]) > 0:
                found[PurePath(path).name] = float(data["bytes"])
    return found

"""The software versions a run met, frozen on the run so a figure can be explained later."""

from __future__ import annotations

import platform
import subprocess
from urllib.parse import urlsplit

from campaigns.runs import storage
from storageops.version import full_version


def xrootd_server_version(url: str, timeout: float = 5.0) -> str:
    """Ask an XRootD door its version (`xrdfs host query config version`); '' if it won't say."""
    parts = urlsplit(url)
    if parts.scheme not in ("root", "roots", "xroot") or not parts.hostname:
        return ""
    address = f"{parts.hostname}:{parts.port or 1094}"
    try:
        out = subprocess.run(
            ["xrdfs", address, "query", "config", "version"],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def collect_versions(snapshot: dict) -> dict:
    endpoints = {ep["url"]: ep for ep in [*snapshot["sources"], *snapshot["destinations"]]}
    return {
        "storageops": full_version(),
        **storage.versions(),
        "python": platform.python_version(),
        "endpoints": {ep["name"]: xrootd_server_version(url) for url, ep in endpoints.items()},
    }

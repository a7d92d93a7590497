"""The StorageOps version, recorded in every run so results can be tied to the code."""

from __future__ import annotations

import subprocess
from functools import cache
from pathlib import Path

__version__ = "0.1.0"


@cache
def full_version() -> str:
    """The release plus the git commit when running from a checkout."""
    root = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return __version__
    return f"{__version__}+{commit}" if commit else __version__

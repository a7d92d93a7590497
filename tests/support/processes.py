"""Where tests find the interpreter and the repository; processes are StorageOps' own."""

from __future__ import annotations

import sys
from pathlib import Path

from devsite.processes import ManagedProcess

ROOT = Path(__file__).resolve().parents[2]
_VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = str(_VENV_PYTHON) if _VENV_PYTHON.exists() else sys.executable

__all__ = ["PYTHON", "ROOT", "ManagedProcess"]

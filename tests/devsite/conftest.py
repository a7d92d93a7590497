"""Fixtures of the devsite tests."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest


@pytest.fixture
def var_dir():
    """A fresh var folder the servers' account (nobody, when root) can reach: not under pytest's
    basetemp, whose /tmp/pytest-of-<user> any pytest session starting meanwhile sets back to
    0700 (four sessions share this machine), which would cut a running PostgreSQL off its data."""
    parent = Path(tempfile.mkdtemp(prefix="storageops-var-"))
    parent.chmod(0o755)
    try:
        yield parent / "var"
    finally:
        shutil.rmtree(parent, ignore_errors=True)

"""The OpenAPI schema builds without a warning: a warning is a name a generated client inherits
(an enum called StateC98Enum, one choice set under two names)."""

from __future__ import annotations

import subprocess
import sys

from tests.support.processes import ROOT


def test_schema_builds_without_warnings(tmp_path):
    # The management command, as CI and a client generator run it; --fail-on-warn makes any
    # warning exit non-zero. Its own process: spectacular's warning counter is process-global.
    out = tmp_path / "schema.yml"
    done = subprocess.run(
        [sys.executable, "manage.py", "spectacular", "--fail-on-warn", "--file", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Warning" not in done.stderr, done.stderr[-3000:]
    schema = out.read_text()
    # The names the overrides give: the run's state and the one baseline choice set.
    assert "RunStateEnum:" in schema
    assert "StateC98Enum" not in schema
    assert "    ChoiceEnum:" not in schema

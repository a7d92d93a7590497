"""`manage.py run_campaign NAME --wait` through a real worker: progress, then the step table."""

from __future__ import annotations

import subprocess

import pytest

from campaigns.models import Run
from tests.support.factories import mock_campaign
from tests.support.processes import PYTHON, ROOT
from tests.support.workers import child_env

pytestmark = pytest.mark.django_db(transaction=True)


def test_run_campaign_waits_and_prints_the_step_table(worker):
    mock_campaign("cli-sweep", file_count=60, dst_query="time=0", concurrency_steps=[1, 2, 4], step_files=20)
    result = subprocess.run(
        [PYTHON, "manage.py", "run_campaign", "cli-sweep", "--wait", "--poll", "0.3"],
        cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    out = result.stdout
    assert "queued: 60 files" in out
    assert "100.0%" in out
    run = Run.objects.get(campaign__name="cli-sweep")
    assert f"Run #{run.pk} succeeded: 60 ok, 0 failed" in out
    table = [line.split() for line in out.splitlines() if line.strip()[:1].isdigit() and len(line.split()) >= 8]
    assert [(row[1], row[2]) for row in table] == [("1", "20"), ("2", "20"), ("4", "20")]


def test_run_campaign_names_an_unknown_campaign(db):
    result = subprocess.run(
        [PYTHON, "manage.py", "run_campaign", "no-such"], cwd=ROOT, env=child_env(), capture_output=True, text=True
    )
    assert result.returncode != 0
    assert "No campaign named 'no-such'" in result.stderr

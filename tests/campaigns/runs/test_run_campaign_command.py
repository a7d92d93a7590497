"""`manage.py run_campaign NAME --wait` through a real worker: progress, then the step table."""

from __future__ import annotations

import subprocess
import time

import pytest

from campaigns import runs
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
    # step, target, achieved mean and max (then "off target" where it missed), then the copies ok.
    steps = run.summary["steps"]
    assert [(row[1], row[2], row[3]) for row in table] == [
        (str(s["concurrency"]), f"{s['achieved_mean']:.2f}", str(s["achieved_max"])) for s in steps
    ]
    assert [row[6] if row[4] == "off" else row[4] for row in table] == ["20", "20", "20"]


def test_a_cancelled_run_prints_its_cancelled_copies_apart_from_the_skipped(worker):
    """Two copies of 30 s under way when the run is cancelled (no grace): they are cancelled,
    the eight never started are skipped, and the summary line says each."""
    mock_campaign("cli-cancel", dst_query="time=30", file_count=10, concurrency_steps=[2], cancel_grace=0)
    waiting = subprocess.Popen(
        [PYTHON, "manage.py", "run_campaign", "cli-cancel", "--wait", "--poll", "0.3"],
        cwd=ROOT, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not Run.objects.filter(campaign__name="cli-cancel", active_transfers__gte=2).exists():
            assert time.monotonic() < deadline and waiting.poll() is None, "no two copies under way"
            time.sleep(0.2)
        runs.request_cancel(Run.objects.get(campaign__name="cli-cancel"))
        out, err = waiting.communicate(timeout=60)
    finally:
        if waiting.poll() is None:
            waiting.kill()
    run = Run.objects.get(campaign__name="cli-cancel")
    assert (run.state, run.files_cancelled, run.files_skipped) == ("cancelled", 2, 8), run.stop_reason
    assert waiting.returncode == 1, err[-2000:]
    assert f"Run #{run.pk} cancelled: 0 ok, 0 failed, 2 cancelled, 8 skipped" in out, out


def test_run_campaign_names_an_unknown_campaign(db):
    result = subprocess.run(
        [PYTHON, "manage.py", "run_campaign", "no-such"], cwd=ROOT, env=child_env(), capture_output=True, text=True
    )
    assert result.returncode != 0
    assert "No campaign named 'no-such'" in result.stderr


def manage(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PYTHON, "manage.py", *args], cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=120
    )


def test_a_partial_run_exits_2_and_retry_failed_finishes_the_campaign(worker):
    # 10 files, 4,000 bytes a run: each run stops at its byte budget and leaves the rest untried.
    mock_campaign("cli-budget", file_count=10, file_size=1000, max_bytes=4000, concurrency_steps=[1])
    first = manage("run_campaign", "cli-budget", "--wait", "--poll", "0.3")
    run = Run.objects.get(campaign__name="cli-budget")
    assert first.returncode == 2, first.stderr[-2000:]
    assert f"Run #{run.pk} partial: {run.files_done} ok, 0 failed, 0 cancelled, {run.files_skipped} skipped" in (
        first.stdout
    )
    assert "byte budget reached" in first.stderr and f"manage.py retry_failed {run.pk}" in first.stderr

    chain = [run]
    while chain[-1].state == "partial":
        result = manage("retry_failed", str(chain[-1].pk), "--wait", "--poll", "0.3")
        retry = Run.objects.get(retry_of=chain[-1])
        left = chain[-1].planned_files - chain[-1].files_done
        assert f"Run #{retry.pk} queued: retry of run #{chain[-1].pk}, {left} files" in result.stdout
        assert result.returncode == (0 if retry.state == "succeeded" else 2), result.stderr[-2000:]
        chain.append(retry)
        assert len(chain) <= 4  # 4 or 5 files a run: three runs at most
    assert chain[-1].state == "succeeded" and f"Run #{chain[-1].pk} succeeded" in result.stdout
    assert sum(r.files_done for r in chain) == 10

    refused = manage("retry_failed", str(chain[-1].pk))
    assert refused.returncode == 1 and "nothing to retry" in refused.stderr
    assert "No run #999999" in manage("retry_failed", "999999").stderr

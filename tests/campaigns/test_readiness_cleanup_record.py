"""A readiness check's record after its clean-up, on a real XRootD door.

A check whose worker was lost kept saying "its files are being removed", its delete steps
"pending", long after the removal the recovery sent had taken its files away. Its page and its
steps now say what happened: the steps never reached were not run, and each delete step says
whether the clean-up removed its file. The same holds for a check its own code broke off.
"""

from __future__ import annotations

import re
from dataclasses import asdict
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from campaigns import readiness
from campaigns.models import ReadinessCheck
from campaigns.readiness import lease as readiness_lease
from campaigns.readiness.probes import probe_url
from campaigns.runs.engines.copies import CopyOptions
from campaigns.runs.engines.gfal2.client import Gfal2Copier
from campaigns.runs.storage import endpoint_credentials
from campaigns.tasks import readiness_remove_probes
from tests.support.factories import endpoint

pytestmark = pytest.mark.django_db(transaction=True)


def page(client, check: ReadinessCheck) -> str:
    return client.get(check.get_absolute_url()).content.decode()


def test_a_check_whose_worker_was_lost_says_what_its_clean_up_did(xrootd_pair, client, viewer, monkeypatch, tmp_path):
    door1, _ = xrootd_pair
    good = endpoint("gone-good", door1.root_url_for("/data/gone/"))
    check = ReadinessCheck(endpoint=good)
    check.save()
    # The worker took it, really wrote its probe, and died in the stat after it.
    assert readiness_lease.take(check.pk, "dead-worker")
    steps = [asdict(s) for s in readiness.plan(check)]
    local = tmp_path / "probe"
    local.write_bytes(b"p" * 1024)
    Gfal2Copier(CopyOptions(timeout=30), endpoint_credentials([good])).upload(str(local), steps[0]["destination"])
    probe = Path(door1.local_path(f"/data/gone/storageops-readiness/check-{check.pk}/probe"))
    assert probe.exists() and steps[0]["destination"] == probe_url(good, check.pk, "probe")
    steps[0].update(state="passed", message="1,024 bytes written", seconds=0.1)
    steps[1].update(state="running", started=timezone.now().timestamp() - 5)
    assert readiness_lease.save(check.pk, "dead-worker", steps=steps)
    ReadinessCheck.objects.filter(pk=check.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))

    sent = []
    monkeypatch.setattr(readiness_lease.current_app, "send_task", lambda name, args: sent.append((name, args)))
    assert readiness_lease.recover_lost_checks() == [check.pk]
    assert sent == [("campaigns.readiness_remove_probes", (check.pk,))]
    check.refresh_from_db()
    assert check.state == "failed" and check.summary.endswith("; its files are being removed"), check.summary
    assert not [s for s in check.steps if s["state"] == "pending"], check.steps
    delete = next(s for s in check.steps if s["operation"] == "delete")
    assert delete["state"] == "skipped" and delete["message"] == "Not run: the check ended, worker lost."
    client.force_login(viewer)
    following = page(client, check)
    assert 'hx-trigger="every 2s"' in following and "Its file is being removed." in following

    # The removal the recovery sent, as a transfers worker runs it.
    assert readiness_remove_probes(check.pk) == []
    assert not probe.exists() and not probe.parent.exists()
    check.refresh_from_db()
    assert re.fullmatch(r"failed: worker lost \(no sign of life from dead-worker for \d+ s\); its files removed",
                        check.summary), check.summary  # fmt: skip
    delete = next(s for s in check.steps if s["operation"] == "delete")
    assert delete["state"] == "skipped" and delete["extra"]["cleanup"] == "removed"
    assert delete["message"] == "Not run: the check ended, worker lost. The clean-up removed its file."
    assert [s["state"] for s in check.steps] == ["passed", "failed", "skipped", "skipped", "skipped"]
    ended = page(client, check)
    assert "hx-trigger" not in ended and "being removed" not in ended
    assert "The clean-up removed its file." in ended and 'data-state="pending"' not in ended


def test_a_check_its_own_code_broke_off_leaves_no_step_pending(xrootd_pair):
    class BreaksAfterUpload(Gfal2Copier):
        def upload(self, local_path: str, url: str) -> None:
            super().upload(local_path, url)
            raise RuntimeError("a bug after the upload")

    door1, _ = xrootd_pair
    check = ReadinessCheck(endpoint=endpoint("broken-good", door1.root_url_for("/data/broken/")))
    check.save()
    check = readiness.run_check(check, BreaksAfterUpload)
    assert check.state == "failed" and check.summary == "failed: RuntimeError: a bug after the upload"
    assert [s["state"] for s in check.steps] == ["failed", "skipped", "skipped", "skipped", "skipped"]
    delete = next(s for s in check.steps if s["operation"] == "delete")
    assert delete["message"] == "Not run: the check ended on a fault. The clean-up removed its file."
    assert delete["extra"]["cleanup"] == "removed"

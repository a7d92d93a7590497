"""Readiness checks as sturdy as runs, with real XRootD doors, real Celery worker processes and a
door that accepts and never answers: every step ends within its deadline, a cancel stops the step
in progress, a check whose worker is SIGKILLed is ended by the recovery within the lease time, and
every ending leaves nothing on the doors' disks. The grid page checks every endpoint and pair."""

from __future__ import annotations

import time

import pytest
from celery import current_app
from django_celery_beat.models import PeriodicTask

from alerts.models import AlertKind, Delivery, Subscription
from campaigns import readiness
from campaigns.models import ReadinessCheck, ReadinessGrid
from campaigns.readiness import grid as readiness_grid
from tests.support.api import api
from tests.support.factories import endpoint
from tests.support.silent_tcp import silent_tcp_server
from tests.support.workers import celery_worker

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

LEASE = 5


@pytest.fixture
def silent_port():
    with silent_tcp_server() as port:
        yield port


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def step_of(check_id: int, key: str) -> dict:
    return next((s for s in ReadinessCheck.objects.get(pk=check_id).steps if s["key"] == key), {})


def probe_folder(door, base: str, check_id: int):
    return door.local_path(f"{base}/storageops-readiness/check-{check_id}")


def test_a_door_that_never_answers_fails_each_step_within_its_deadline_and_ten_seconds(xrootd_pair, silent_port):
    door1, _ = xrootd_pair
    deadline = 5
    good = endpoint("sturdy-good", door1.root_url_for("/data/sturdy/"))
    hung = endpoint("sturdy-hung", f"root://127.0.0.1:{silent_port}//data/", timeout=deadline)
    check = ReadinessCheck(endpoint=good, peer=hung)
    check.save()
    tick = time.monotonic()
    check = readiness.run_check(check)
    took = time.monotonic() - tick
    ran = [s for s in check.steps if s["seconds"] is not None and s["state"] != "skipped"]
    print(f"\nthe whole check: {took:.1f} s")
    print(*(f"{s['state']:8} {s['seconds']:7.2f} s (deadline {s['deadline']} s) {s['title']}" for s in ran), sep="\n")
    hung_steps = [s for s in ran if s["endpoint"] == "sturdy-hung"]
    assert {s["key"] for s in hung_steps} >= {"upload:sturdy-hung", "tpc-tpc:sturdy-good>sturdy-hung"}
    for step in hung_steps:
        assert step["state"] == "failed" and step["deadline"] == deadline, step
        assert step["seconds"] <= deadline + 10, step
        assert step["message"].startswith(f"No answer within the {deadline} s deadline"), step
    # The good door's own steps passed, under its own (default) timeout, and nothing is left on it.
    assert all(s["state"] == "passed" for s in ran if s["key"].endswith(":sturdy-good")), check.steps
    assert step_of(check.pk, "upload:sturdy-good")["deadline"] == good.timeout
    assert check.state == "failed" and check.summary.startswith("5 of 14 steps passed; first failure: Upload to s")
    assert not probe_folder(door1, "/data/sturdy", check.pk).exists()


def test_cancel_on_the_page_stops_the_step_in_progress_and_removes_the_probe(
    client, operator, viewer, xrootd_pair, silent_port, worker
):
    door1, _ = xrootd_pair
    good = endpoint("cancel-good", door1.root_url_for("/data/cancel/"))
    hung = endpoint("cancel-hung", f"root://127.0.0.1:{silent_port}//data/", timeout=600)
    check = readiness.start(good, hung, user=operator)
    wait_for(lambda: step_of(check.pk, "upload:cancel-hung").get("state") == "running", 60, "the hung upload to start")
    probe = probe_folder(door1, "/data/cancel", check.pk) / "probe"
    assert probe.exists(), "the good door's probe is written before the hung step"
    time.sleep(1.5)
    # The page shows the step in progress with its elapsed time, and (to an operator) the button.
    client.force_login(operator)
    page = client.get(f"/campaigns/readiness/{check.pk}/", HTTP_HX_REQUEST="true").content.decode()
    assert 'data-step="upload:cancel-hung" data-state="running"' in page and " s so far" in page
    assert 'id="readiness-cancel"' in page and 'hx-trigger="every 2s"' in page
    client.force_login(viewer)
    assert 'id="readiness-cancel"' not in client.get(f"/campaigns/readiness/{check.pk}/").content.decode()
    assert client.post(f"/campaigns/readiness/{check.pk}/cancel/").status_code == 403
    client.force_login(operator)
    asked = time.monotonic()
    response = client.post(f"/campaigns/readiness/{check.pk}/cancel/", HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and 'id="readiness-cancelling"' in response.content.decode()
    wait_for(lambda: ReadinessCheck.objects.get(pk=check.pk).state == "cancelled", 30, "the check to end cancelled")
    ended = time.monotonic() - asked
    check.refresh_from_db()
    step = step_of(check.pk, "upload:cancel-hung")
    print(f"\ncancel asked -> cancelled: {ended:.1f} s; the step: {step['seconds']} s, {step['message']}")
    assert step["state"] == "cancelled" and step["message"].startswith("Cancelled while it ran"), step
    assert ended < 25  # the tick (1 s), the cancel ignored (5 s), the removal on the silent door (5+5 s)
    assert all(s["state"] == "skipped" for s in check.steps[check.steps.index(step) + 1 :])
    # The good door's probe and folder are gone; what the hung door may hold is named, not hidden.
    hung_probe = f"root://127.0.0.1:{silent_port}//data/storageops-readiness/check-{check.pk}/probe"
    assert check.summary == f"Cancelled after 4 of 14 steps passed; not removed: {hung_probe}: no answer within 5 s"
    assert not probe.exists() and not probe.parent.exists()
    # The API: a viewer may not cancel; an ended check cannot be cancelled, the field named.
    assert api(viewer, "viewer").post(f"/api/v1/readiness-checks/{check.pk}/cancel/").status_code == 403
    again = api(operator, "operator").post(f"/api/v1/readiness-checks/{check.pk}/cancel/")
    assert again.status_code == 400 and "state" in again.json()["error"]["fields"], again.content
    # A queued check cancelled through the API ends at once, having written nothing.
    queued = ReadinessCheck(endpoint=good)
    queued.save()
    cancelled = api(operator, "operator").post(f"/api/v1/readiness-checks/{queued.pk}/cancel/")
    assert cancelled.status_code == 202 and cancelled.json()["state"] == "cancelled", cancelled.content


def test_a_check_whose_worker_is_sigkilled_mid_step_fails_worker_lost_and_its_probe_is_removed(
    xrootd_pair, silent_port, log_dir
):
    door1, _ = xrootd_pair
    good = endpoint("lost-good", door1.root_url_for("/data/lost/"))
    hung = endpoint("lost-hung", f"root://127.0.0.1:{silent_port}//data/", timeout=600)
    doomed = celery_worker(log_dir, name="doomed", STORAGEOPS_RUN_LEASE_SECONDS=str(LEASE))
    rescuer = None
    try:
        doomed.wait_for_log("ready.", timeout=60)
        check = readiness.start(good, hung)
        wait_for(lambda: step_of(check.pk, "upload:lost-hung").get("state") == "running", 60, "the hung upload")
        probe = probe_folder(door1, "/data/lost", check.pk) / "probe"
        assert probe.exists()
        rescuer = celery_worker(log_dir, name="rescuer", STORAGEOPS_RUN_LEASE_SECONDS=str(LEASE))
        rescuer.wait_for_log("ready.", timeout=60)
        assert ReadinessCheck.objects.get(pk=check.pk).state == "running"
        doomed.kill()
        killed = time.monotonic()
        # What beat does every 15 s, every second here: the recovery task, sent by name.
        failed_after = None
        while failed_after is None:
            assert time.monotonic() - killed < LEASE + 30, rescuer.log_text()[-3000:]
            current_app.send_task("campaigns.recover_runs")
            time.sleep(1)
            if ReadinessCheck.objects.get(pk=check.pk).state != "running":
                failed_after = time.monotonic() - killed
        wait_for(lambda: not probe.parent.exists(), 60, "the probe and its folder to leave door1's disk")
        gone_after = time.monotonic() - killed
        check.refresh_from_db()
        print(f"\nSIGKILL -> failed: {failed_after:.1f} s (lease {LEASE} s, recovery sent every 1 s); "
              f"-> probe gone from the door: {gone_after:.1f} s; summary: {check.summary}")  # fmt: skip
        assert check.state == "failed" and check.summary.startswith("failed: worker lost"), check.summary
        assert failed_after <= LEASE + 2
        step = step_of(check.pk, "upload:lost-hung")
        assert step["state"] == "failed" and "worker lost" in step["message"]
    finally:
        doomed.stop()
        if rescuer:
            rescuer.stop()


def test_the_grid_checks_every_door_and_pair_and_a_scheduled_failure_is_an_alert(
    client, operator, xrootd_pair, worker, webhook
):
    door1, door2 = xrootd_pair
    read_only = door2.local_path("/data/grid-ro")
    read_only.mkdir(parents=True, exist_ok=True)
    read_only.chmod(0o555)
    endpoint("grid-a", door1.root_url_for("/data/grid/"))
    endpoint("grid-b", door2.root_url_for("/data/grid-ro/"))
    endpoint("grid-mock", "mock://fake.test/data/")
    url, received = webhook
    Subscription.objects.create(name="site", webhook_url=url, kinds=[AlertKind.READINESS_FAILED])
    client.force_login(operator)
    # The daily schedule, set on the page: beat's PeriodicTask, then off again.
    assert client.post("/campaigns/readiness/grid/schedule/", {"enabled": "on", "daily_at": "6:3x"}).status_code == 302
    assert not PeriodicTask.objects.filter(name=readiness_grid.DAILY_TASK_NAME).exists()
    client.post("/campaigns/readiness/grid/schedule/", {"enabled": "on", "daily_at": "06:30"})
    task = PeriodicTask.objects.get(name=readiness_grid.DAILY_TASK_NAME)
    assert task.enabled and task.task == "campaigns.readiness_grid" and (task.crontab.hour, task.crontab.minute) == (
        "6", "30")  # fmt: skip
    assert "every day at 06:30 UTC" in client.get("/campaigns/readiness/grid/").content.decode()
    client.post("/campaigns/readiness/grid/schedule/", {})
    assert not PeriodicTask.objects.get(name=readiness_grid.DAILY_TASK_NAME).enabled
    # What the daily task does: a scheduled grid, run by the worker.
    grid = readiness_grid.start_grid(trigger=ReadinessGrid.Trigger.SCHEDULE)
    assert sorted((c.endpoint.name, c.peer.name if c.peer else "") for c in grid.checks.all()) == [
        ("grid-a", ""), ("grid-a", "grid-b"), ("grid-b", "")]  # fmt: skip
    wait_for(lambda: ReadinessGrid.objects.get(pk=grid.pk).ended_at, 180, "the grid to end")
    page = client.get(f"/campaigns/readiness/grid/{grid.pk}/").content.decode()
    for row in ("grid-a", "grid-b", "grid-a → grid-b", "grid-b → grid-a"):
        assert f'data-row="{row}"' in page, row
    cells = {c.split('"')[0] for c in page.split('data-cell="')[1:]}
    assert len(cells) == 2 * 5 + 2 * 2  # each door: its 5 kinds of step; each direction: TPC and its delete
    assert 'data-cell="grid-a|0" data-state="passed"' in page
    assert 'data-cell="grid-b|0" data-state="failed"' in page  # the read-only door's upload
    assert 'data-cell="grid-a → grid-b|4" data-state="failed"' in page
    assert 'data-cell="grid-b → grid-a|4" data-state="skipped"' in page
    for check in grid.checks.all():
        assert f'href="/campaigns/readiness/{check.pk}/"' in page
    assert "hx-trigger" not in page.split('id="readiness-matrix"')[1].split(">")[0]
    delivery = wait_for(lambda: Delivery.objects.filter(kind=AlertKind.READINESS_FAILED).first(), 30, "the alert")
    assert f"Daily readiness grid #{grid.pk}: 2 checks did not pass" == delivery.subject
    assert "grid-b" in delivery.body and received


def test_a_fault_in_the_checks_own_code_ends_it_failed_and_removes_what_it_wrote(xrootd_pair):
    """The upload really writes the probe, then the code around it breaks (a bug, not the storage):
    the check ends failed with the fault's words, nothing stays running, the probe is removed."""
    from campaigns.runs.engines.gfal2.client import Gfal2Copier

    class BreaksAfterUpload(Gfal2Copier):
        def upload(self, local_path: str, url: str) -> None:
            super().upload(local_path, url)
            raise RuntimeError("a bug after the upload")

    door1, _ = xrootd_pair
    good = endpoint("fault-good", door1.root_url_for("/data/fault/"))
    check = ReadinessCheck(endpoint=good)
    check.save()
    check = readiness.run_check(check, BreaksAfterUpload)
    assert check.state == "failed" and check.summary == "failed: RuntimeError: a bug after the upload", check.summary
    upload = step_of(check.pk, "upload:fault-good")
    assert upload["state"] == "failed" and upload["message"].startswith("Ended by a fault: RuntimeError")
    assert not [s for s in check.steps if s["state"] == "running"]
    assert not probe_folder(door1, "/data/fault", check.pk).exists()

"""The run page's live "Now" line names the step in force from the run's first second.

It read "step - at concurrency 2" (the dash an en dash) at a run's start: the first step's index
is 0, which the template's `default` filter took for no value; and until the loop's first
progress write the run had no step at all. Driven here through the real driver on gfal2's mock
plugin.
"""

from __future__ import annotations

import re
import threading
import time

import pytest
from django.db import connection

from campaigns import runs
from campaigns.choices import RunState
from campaigns.models import Run
from campaigns.runs import leases
from campaigns.runs.lifecycle import RunDriver
from tests.support.factories import mock_campaign

pytestmark = pytest.mark.django_db(transaction=True)


def now_line(client, run: Run) -> str:
    html = client.get(f"/campaigns/runs/{run.pk}/progress/").content.decode()
    return re.search(r"<dt>Now</dt><dd>(.*?)</dd>", html, re.S).group(1)


def live_now_line(client, run: Run) -> str | None:
    """The Now line of a run read as running; None when it ended between that read and the page
    (its page then has no Now line, rightly), which a loaded machine makes likely."""
    html = client.get(f"/campaigns/runs/{run.pk}/progress/").content.decode()
    found = re.search(r"<dt>Now</dt><dd>(.*?)</dd>", html, re.S)
    if found is None:
        assert not Run.objects.get(pk=run.pk).is_live, f"a live run's page without its Now line: {html}"
        return None
    return found.group(1)


def test_the_first_step_is_named_the_moment_the_run_starts(client, viewer):
    client.force_login(viewer)
    campaign = mock_campaign("now-first", file_count=20, dst_query="time=1", concurrency_steps=[2, 4], step_files=10)
    run = runs.create_run(campaign, trigger="command")
    assert "no step started yet" in now_line(client, run)
    # The driver's preparation alone, as it leaves the run before its loop's first progress write.
    driver = RunDriver(run.pk, lease_holder="first-second")
    assert leases.acquire_lease(run.pk, "first-second")
    driver._prepare(Run.objects.get(pk=run.pk))
    started = Run.objects.get(pk=run.pk)
    assert started.state == RunState.RUNNING
    assert "step 0 at concurrency 2" in now_line(client, started)


def drive_then_close(run_id: int) -> None:
    try:
        RunDriver(run_id).drive()
    finally:
        connection.close()  # the thread's own: none is left on the test database


def test_every_live_rendering_names_the_real_step(client, viewer):
    client.force_login(viewer)
    campaign = mock_campaign("now-live", file_count=12, dst_query="time=1", concurrency_steps=[2, 4], step_files=6)
    run = runs.create_run(campaign, trigger="command")
    thread = threading.Thread(target=drive_then_close, args=(run.pk,))
    thread.start()
    seen = []
    try:
        deadline = time.monotonic() + 60
        while thread.is_alive() and time.monotonic() < deadline:
            live = Run.objects.get(pk=run.pk)
            if live.state == RunState.RUNNING:
                line = live_now_line(client, live)
                if line is not None:
                    seen.append(line)
            time.sleep(0.1)
    finally:
        thread.join(timeout=60)
    assert seen, "the run was never seen running"
    assert "step 0 at concurrency 2" in seen[0], seen[0]
    assert all(re.search(r"step [01] at concurrency [24]", line) for line in seen), seen
    assert any("step 1 at concurrency 4" in line for line in seen), seen

"""A step that ends before FTS puts its link limit in force is named as such by the verdict.

FTS's scheduler obeys the optimizer's value for a link, which the optimizer takes from the range
StorageOps pinned only at its next pass (the double reproduces it). Here the link holds the
value 1 from the first step and no pass comes again within the run, as a step of a few short
copies ends well inside a 60-s OptimizerInterval: the step of 2 runs under the limit of 1, and
the page must say so, and what to change, rather than read the step of 2 as a point of the curve.
"""

from __future__ import annotations

import threading

import pytest
from django.test import Client

from campaigns.choices import RunState
from campaigns.models import RunStep
from tests.campaigns.runs.test_fts_steps import LINK, TOKEN, drive, new_run
from tests.support.fts_double import FtsDouble

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_step_run_under_the_previous_limit_is_named_with_its_remedy(admin_user):
    double = FtsDouble(token=TOKEN, optimizer_interval=None).start()
    try:
        run = new_run("limit-lag", double, 1, file_count=8, concurrency_steps=[1, 2], step_files=4, timeout=60)
        # The optimizer's value the first step runs under, and no pass after it.
        with double.lock:
            double.optimizer[LINK] = 1
        result: list = []
        thread = threading.Thread(target=drive, args=(run.pk, result))
        thread.start()
        thread.join(120)
        assert not thread.is_alive()
    finally:
        double.stop()
    run.refresh_from_db()
    assert run.state == RunState.SUCCEEDED, (run.state, run.stop_reason)
    steps = {s["step"]: s for s in run.summary["steps"]}
    assert steps[1]["achieved_max"] == 1 and steps[1]["off_target"], steps[1]
    assert RunStep.objects.get(run=run, index=0).measured_from is not None
    assert RunStep.objects.get(run=run, index=1).measured_from is None  # never ran at 2
    verdict = run.summary["verdict"]
    lag = verdict["link_limit"]
    assert [(f["step"], f["concurrency"], f["achieved_max"], f["previous"]) for f in lag["steps"]] == [(1, 2, 1, 1)]
    said = verdict["headline"]
    assert "Link limit not yet in force: ×2 had at most 1 in flight" in said, said
    assert "×1's limit still in force" in said and "measure_files" in said, said

    client = Client()
    client.force_login(admin_user)
    page = client.get(f"/campaigns/runs/{run.pk}/").content.decode()
    assert 'data-verdict-row="link_limit"' in page
    listing = client.get(f"/campaigns/{run.campaign_id}/").content.decode()
    assert 'data-verdict-mark="link_limit"' in listing, listing

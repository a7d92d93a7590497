"""A failed or cancelled run is never shown green, and its stop reason names the failure.

Sites read a failed run's page with a green "no data" verdict badge and the stop reason
"concurrency sweep completed". Driven here through the real driver on gfal2's mock plugin,
every copy refused by its destination (errno 110: a transfer timeout).
"""

from __future__ import annotations

import re

import pytest
from django.template.loader import render_to_string

from campaigns.choices import RunState
from campaigns.models import Run
from tests.support.factories import campaign, endpoint
from tests.support.runs import drive

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def failed() -> Run:
    src = endpoint("all-bad-src", "mock://src.test/data/")
    bad = endpoint("all-bad-dst", "mock://bad.test/data/?transfer_errno=110")
    return drive(campaign("all-bad", [src], [bad], file_count=4, concurrency_steps=[1, 2], step_files=2))


def green(html: str) -> list[str]:
    return re.findall(r'<span class="badge badge-succeeded[^>]*>[^<]*</span>', html)


def test_a_run_whose_every_copy_failed_says_what_failed(client, viewer, failed):
    assert failed.state == RunState.FAILED and failed.files_failed == 4
    print("stop reason:", failed.stop_reason)
    assert failed.stop_reason == "every copy failed: 4 of 4 (transfer_timeout 4)"
    client.force_login(viewer)
    page = client.get(failed.get_absolute_url()).content.decode()
    assert "every copy failed: 4 of 4" in page and "sweep completed" not in page
    assert green(page) == []
    home = client.get("/").content.decode()
    assert f"/campaigns/runs/{failed.pk}/" in home and green(home) == []
    runs_list = client.get("/campaigns/runs/").content.decode()
    assert green(runs_list) == []


@pytest.mark.parametrize("state", [RunState.FAILED, RunState.CANCELLED])
def test_a_judgement_of_a_failed_or_cancelled_run_is_not_green(state):
    judgement = {"status": "within", "headline": "Within the bands of 4 comparable runs."}
    html = render_to_string("campaigns/partials/judgement_badge.html", {"judgement": judgement, "state": state})
    assert green(html) == [] and f"badge-{state}" in html
    ok = render_to_string("campaigns/partials/judgement_badge.html", {"judgement": judgement, "state": "succeeded"})
    assert green(ok)

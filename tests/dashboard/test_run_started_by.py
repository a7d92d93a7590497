"""Who started a run: the operator signed in on the web, the owner of the API token, the schedule
or the management command; said on the run page, the start's row of the Events page, the API
and the run's report (the issue: the Events page's "Who" was a dash, the API had only a trigger)."""

from __future__ import annotations

import io
import re
from datetime import UTC, datetime

import pytest
from django.core.management import call_command
from django.urls import reverse

from campaigns.models import CampaignSchedule, Run
from campaigns.runs import scheduling
from campaigns.runs.lifecycle import RunDriver
from collectors.models import Event
from storageops import roles
from tests.support.api import api
from tests.support.factories import half_failing_campaign, mock_campaign

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_dispatch(django_capture_on_commit_callbacks):
    """A start hands its run to a worker on commit; these tests drive it in-process, or need it
    only to exist."""
    with django_capture_on_commit_callbacks(execute=False):
        yield


def _drive(run_id: int) -> None:
    RunDriver(run_id).drive()  # the worker's part: it logs the run's start event


def _started(client, user, campaign) -> Run:
    """A run `user` started with the campaign page's button."""
    client.force_login(user)
    client.post(f"/campaigns/{campaign.pk}/start/")
    return Run.objects.get(campaign=campaign)


def _start_row_who(client, run: Run) -> str:
    """The "Who" cell of the run's start on the Events page."""
    html = client.get(reverse("collectors:event_list"), {"kind": "run_start", "run": run.pk}).content.decode()
    body = re.search(r"<tbody>(.*?)</tbody>", html, re.S).group(1)
    [row] = re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S)
    cells = [re.sub(r"<[^>]+>|\s+", " ", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
    assert cells[1] == "Run start" and cells[3] == f"run #{run.pk}", cells
    return cells[4]


def _run_page_says(client, run: Run) -> str:
    html = client.get(run.get_absolute_url()).content.decode()
    return re.search(r"<strong data-started-by>(.*?)</strong>", html).group(1)


def test_a_run_started_on_the_web_names_its_operator_everywhere(client, operator, viewer):
    run = _started(client, operator, mock_campaign("by-hand", file_count=4))
    assert (run.trigger, run.started_by, run.started_by_name) == ("web", operator, "otto-operator")
    _drive(run.pk)

    client.force_login(viewer)
    assert _run_page_says(client, run) == "otto-operator"
    assert _start_row_who(client, run) == "otto-operator"
    body = api(viewer, roles.VIEWER).get(f"/api/v1/runs/{run.pk}/").json()
    assert (body["started_by"], body["started_by_name"], body["trigger"]) == ("otto-operator", "otto-operator", "web")
    report = client.get(f"/campaigns/runs/{run.pk}/report.html").content.decode()
    header = report[report.index('id="provenance"') : report.index("</header>")]
    assert "started by <span data-started-by>otto-operator</span>" in header
    assert "by vera-viewer" in header  # who made the report is another line


def test_retry_failed_on_the_web_names_the_operator_who_asked(client, operator):
    first = _started(client, operator, half_failing_campaign("half", file_count=4))
    _drive(first.pk)
    client.post(f"/campaigns/runs/{first.pk}/retry-failed/")
    retry = Run.objects.get(retry_of=first)
    assert (retry.started_by, retry.started_by_name) == (operator, "otto-operator")
    assert Event.objects.get(kind="note", run_id=retry.pk).who == "otto-operator"


def test_a_run_started_through_the_api_names_the_tokens_owner(client, operator, viewer):
    campaign = mock_campaign("by-token")
    started = api(operator, roles.OPERATOR).post(f"/api/v1/campaigns/{campaign.pk}/start/")
    assert started.status_code == 202
    assert (started.json()["started_by"], started.json()["trigger"]) == ("otto-operator", "api")
    run = Run.objects.get(pk=started.json()["id"])
    listed = api(viewer, roles.VIEWER).get("/api/v1/runs/", {"campaign": campaign.pk}).json()["results"]
    assert [r["started_by"] for r in listed] == ["otto-operator"]
    client.force_login(viewer)
    assert _run_page_says(client, run) == "otto-operator"


def test_a_scheduled_start_says_which_schedule(client, viewer):
    campaign = mock_campaign("nightly")
    schedule = scheduling.save_schedule(
        CampaignSchedule(campaign=campaign, kind="cron", cron="0 2 * * *", time_zone="Europe/Prague")
    )
    due = datetime(2026, 11, 25, 1, 0, tzinfo=UTC)
    run = scheduling.fire(schedule.pk, due_at=due, now=due).started
    words = f"schedule #{schedule.pk}: cron '0 2 * * *' (Europe/Prague)"
    assert (run.trigger, run.started_by, run.started_by_name) == ("schedule", None, words)
    _drive(run.pk)

    # Said as it was when it fired: a schedule edited or deleted later does not rewrite it.
    scheduling.delete_schedule(schedule)
    client.force_login(viewer)
    assert _run_page_says(client, run) == words.replace("'", "&#x27;")
    assert _start_row_who(client, run) == words.replace("'", "&#x27;")
    body = api(viewer, roles.VIEWER).get(f"/api/v1/runs/{run.pk}/").json()
    assert (body["started_by"], body["started_by_name"]) == (None, words)


def test_a_command_says_it_started_the_run():
    campaign = mock_campaign("from-shell")
    call_command("run_campaign", "from-shell", stdout=io.StringIO())
    run = Run.objects.get(campaign=campaign)
    assert run.trigger == "command" and run.started_by is None
    assert run.started_by_name.startswith("manage.py run_campaign")

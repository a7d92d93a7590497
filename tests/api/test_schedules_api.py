"""Schedules through the API and the campaign page: validated, and beat's task follows them."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse
from django_celery_beat.models import PeriodicTask

from campaigns.models import CampaignSchedule
from tests.support.api import api
from tests.support.factories import mock_campaign

pytestmark = pytest.mark.django_db


def test_create_edit_and_delete_a_schedule(admin_user):
    campaign = mock_campaign("api-sched")
    client = api(admin_user, "admin")
    wrong = {"campaign": campaign.pk, "kind": "cron", "cron": "0 25 * * *", "time_zone": "Nowhere/City"}
    bad = client.post("/api/v1/schedules/", wrong, format="json")
    assert bad.status_code == 400
    assert set(bad.json()["error"]["fields"]) == {"cron", "time_zone"}
    half_window = {"campaign": campaign.pk, "kind": "cron", "cron": "0 9 * * *", "window_start": "09:00"}
    bad = client.post("/api/v1/schedules/", half_window, format="json")
    assert bad.status_code == 400 and set(bad.json()["error"]["fields"]) == {"window_end"}
    assert not PeriodicTask.objects.filter(task="campaigns.scheduled_start").exists()

    body = {"campaign": campaign.pk, "kind": "cron", "cron": "0 9 * * 1-5", "time_zone": "Europe/Prague",
            "window_days": "mon-fri", "window_start": "09:00", "window_end": "16:00", "max_slip_minutes": 15,
            "max_runs": 10}  # fmt: skip
    created = client.post("/api/v1/schedules/", body, format="json")
    assert created.status_code == 201, created.json()
    data = created.json()
    assert data["describe"] == "cron '0 9 * * 1-5' (Europe/Prague)" and data["runs_started"] == 0
    task = PeriodicTask.objects.get(pk=data["periodic_task"])
    assert task.crontab.hour == "9" and json.loads(task.kwargs) == {"schedule_id": data["id"]}

    again = client.post("/api/v1/schedules/", body, format="json")
    assert again.status_code == 400 and "campaign" in again.json()["error"]["fields"]

    changed = client.patch(data["url"], {"kind": "interval", "interval_minutes": 90, "enabled": False}, format="json")
    assert changed.status_code == 200, changed.json()
    task.refresh_from_db()
    assert task.interval.every == 90 and task.crontab is None and not task.enabled
    refused = client.patch(data["url"], {"kind": "cron", "cron": ""}, format="json")
    assert refused.status_code == 400 and "cron" in refused.json()["error"]["fields"]
    task.refresh_from_db()
    assert task.interval.every == 90, "a refused edit leaves beat's task as it was"

    assert client.delete(data["url"]).status_code == 204
    assert not PeriodicTask.objects.filter(pk=task.pk).exists()


def test_operators_read_schedules_but_do_not_edit_them(operator):
    campaign = mock_campaign("api-op")
    client = api(operator, "operator")
    response = client.post(
        "/api/v1/schedules/", {"campaign": campaign.pk, "kind": "cron", "cron": "* * * * *"}, format="json"
    )
    assert response.status_code == 403
    assert client.get("/api/v1/schedules/").status_code == 200


def test_the_campaign_page_edits_its_schedule(client, admin_user, operator):
    campaign = mock_campaign("page-sched")
    page = reverse("campaigns:campaign_detail", args=[campaign.pk])
    card = reverse("campaigns:campaign_schedule", args=[campaign.pk])
    client.force_login(admin_user)
    assert card.encode() in client.get(page).content  # the page loads the card
    shown = client.get(card)
    assert shown.status_code == 200 and b"Add a schedule" in shown.content

    bad = client.post(card, {"kind": "cron", "cron": "every day", "time_zone": "UTC", "max_slip_minutes": 10},
                      HTTP_HX_REQUEST="true")  # fmt: skip
    assert bad.status_code == 200 and b"errorlist" in bad.content  # htmx swaps 2xx only
    assert client.post(card, {"kind": "cron", "cron": "every day"}).status_code == 400  # without htmx
    assert not CampaignSchedule.objects.exists()

    nightly = {"enabled": "on", "kind": "cron", "cron": "30 2 * * *", "time_zone": "UTC", "window_days": "mon-fri",
               "max_slip_minutes": 10}  # fmt: skip
    ok = client.post(card, nightly, HTTP_HX_REQUEST="true")
    assert ok.status_code == 200 and b"Schedule saved." in ok.content
    schedule = CampaignSchedule.objects.get(campaign=campaign)
    assert schedule.periodic_task.crontab.minute == "30" and schedule.periodic_task.enabled

    removed = client.post(card, {"action": "delete"}, HTTP_HX_REQUEST="true")
    assert b"Schedule removed." in removed.content and not CampaignSchedule.objects.exists()
    assert not PeriodicTask.objects.filter(task="campaigns.scheduled_start").exists()

    client.force_login(operator)
    assert client.get(card).status_code == 200
    assert b"Save the schedule" not in client.get(card).content
    assert client.post(card, {"kind": "cron", "cron": "* * * * *"}).status_code == 403

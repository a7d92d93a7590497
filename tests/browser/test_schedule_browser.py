"""The schedule card in a real browser (Chromium): it loads itself into the campaign page,
refuses a bad cron expression in place, saves a good one, and beat's task follows."""

from __future__ import annotations

import pytest
from django.db import connections
from django_celery_beat.models import PeriodicTask

from campaigns.models import CampaignSchedule
from tests.support.factories import mock_campaign
from tests.support.web import gunicorn_server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def test_an_admin_schedules_a_campaign_from_its_page(page, admin_user, log_dir, settings):
    from playwright.sync_api import expect

    # The web process checks passwords with the real hasher, not the tests' fast one.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    admin_user.set_password("correct horse battery staple")
    admin_user.save()
    campaign = mock_campaign("browser-sched")
    web, base = gunicorn_server(log_dir, DEBUG="1")
    try:
        page.goto(f"{base}/login/")
        page.fill("input[name=username]", admin_user.username)
        page.fill("input[name=password]", "correct horse battery staple")
        page.click("form[action='/login/'] button[type=submit]")
        page.goto(f"{base}{campaign.get_absolute_url()}")
        card = page.locator("#campaign-schedule")
        expect(card).to_contain_text("none: runs start by hand")  # swapped in by htmx
        card.locator("summary").click()
        card.locator("select[name=kind]").select_option("cron")
        card.locator("input[name=cron]").fill("0 25 * * *")
        card.locator("input[name=time_zone]").fill("Europe/Prague")
        card.locator("button", has_text="Save the schedule").click()
        expect(page.locator("#campaign-schedule .errorlist")).to_contain_text("not in 0-23")
        assert not CampaignSchedule.objects.exists()

        page.locator("#campaign-schedule input[name=cron]").fill("0 9 * * 1-5")
        page.locator("#campaign-schedule input[name=window_days]").fill("mon-fri")
        page.locator("#campaign-schedule button", has_text="Save the schedule").click()
        expect(page.locator("#campaign-schedule")).to_contain_text("Schedule saved.")
        expect(page.locator("#campaign-schedule")).to_contain_text("cron '0 9 * * 1-5' (Europe/Prague)")
    finally:
        # Inside Playwright's loop the ORM opened a connection of its own: close it here,
        # or the test database cannot be dropped at the end of the session.
        connections.close_all()
        web.stop()
    schedule = CampaignSchedule.objects.get(campaign=campaign)
    task = PeriodicTask.objects.get(pk=schedule.periodic_task_id)
    assert (task.crontab.hour, task.crontab.day_of_week, task.enabled) == ("9", "1-5", True)

"""'Accept as the new normal from run #N' in a real browser (Chromium): an operator picks a
slowed run on the campaign page, says why, and the page then says where baselines start."""

from __future__ import annotations

import pytest

from campaigns.models import Run
from collectors.models import Event
from tests.browser.test_dashboard_browser import log_in
from tests.dashboard.test_new_normal_page import slowed  # noqa: F401 -- the fixture

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def test_an_operator_accepts_a_new_normal_on_the_campaign_page(slowed, page, live_server, operator):  # noqa: F811
    from playwright.sync_api import expect

    campaign, _, slow = slowed
    log_in(page, live_server, operator.username)
    page.goto(f"{live_server.url}{campaign.get_absolute_url()}")
    card = page.locator("#new-normal")
    card.locator("select[name=run]").select_option(str(slow[0].pk))
    card.locator("input[name=reason]").fill("door2 moved to the slow pool for good")
    card.locator("button", has_text="Accept as the new normal").click()
    expect(page.locator("#messages")).to_contain_text(f"Run #{slow[0].pk} accepted as the new normal")
    expect(page.locator("#new-normal")).to_have_attribute("data-normal-from", str(slow[0].pk))
    expect(page.locator("#new-normal")).to_contain_text("door2 moved to the slow pool for good")
    assert Run.objects.get(pk=slow[0].pk).baseline_choice == "accepted"
    assert Event.objects.get(kind="note", run_id=slow[0].pk).user == operator

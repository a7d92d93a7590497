"""Single sign-on in a real browser against a real OpenID provider (node oidc-provider on loopback)
and a real worker: an operator signs in through the provider and starts a run; dropped from the
operators' group at the provider, the same person signs in again and may no longer start runs;
with the provider stopped, the login page says so and the local break-glass login still works."""

from __future__ import annotations

import re
import time

import pytest

from campaigns.models import Run
from storageops.models import ChangeRecord, ExternalIdentity
from tests.browser.test_dashboard_browser import PASSWORD, SCREENSHOTS
from tests.support.factories import mock_campaign

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def sign_in_through_provider(page, live_server, login: str) -> None:
    page.goto(f"{live_server.url}/login/")
    page.click("#sso-sign-in")
    # The provider's own login form (its development interactions), on the provider's origin.
    page.wait_for_selector("input[name=login]")
    page.fill("input[name=login]", login)
    page.fill("input[name=password]", "any")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")


def sign_out(page, live_server, provider) -> None:
    page.goto(f"{live_server.url}/campaigns/")  # a page that does not reload itself (a run page does)
    page.click("text=Log out")
    # The provider asks whether to end its session too (RP-initiated logout), then sends us back.
    page.wait_for_url(f"{provider.issuer}/session/end**")
    page.click("text=Yes, sign me out")
    page.wait_for_url(f"{live_server.url}/login/")


def _wait_for_end(run: Run, timeout_s: float = 90) -> Run:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        run.refresh_from_db()
        if run.state in ("succeeded", "failed", "cancelled"):
            return run
        time.sleep(0.5)
    raise AssertionError(f"run {run.pk} still {run.state} after {timeout_s} s")


def test_an_operator_signs_in_starts_a_run_and_loses_the_role_at_the_provider(
    page, live_server, worker, oidc_provider, settings
):
    settings.STORAGEOPS_OIDC = oidc_provider.config(session_max_age=900)
    campaign = mock_campaign("sso-browser", file_count=4)

    page.goto(f"{live_server.url}/login/")
    assert page.inner_text("#sso-sign-in") == "Sign in with Test IAM"
    page.screenshot(path=str(SCREENSHOTS / "login-sso.png"))

    sign_in_through_provider(page, live_server, "otto")
    identity = ExternalIdentity.objects.select_related("user").get(issuer=oidc_provider.issuer, subject="otto")
    assert page.inner_text("span[title='Signed in']") == identity.user.username == "otto"
    # The session lasts STORAGEOPS_OIDC_SESSION_MAX_AGE, not Django's two weeks.
    session = next(c for c in page.context.cookies() if c["name"] == "sessionid")
    assert abs(session["expires"] - (time.time() + 900)) < 120

    page.goto(f"{live_server.url}/campaigns/{campaign.pk}/")
    page.click("text=Start a run")
    page.wait_for_url(re.compile(r".*/campaigns/runs/\d+/$"))
    run = Run.objects.get(pk=int(page.url.rstrip("/").rsplit("/", 1)[1]))
    assert run.campaign_id == campaign.pk
    assert _wait_for_end(run).state == "succeeded"

    sign_out(page, live_server, oidc_provider)
    assert not page.locator("span[title='Signed in']").count()

    # The site's IAM drops otto from /storage/ops; /storage (viewer) stays.
    oidc_provider.set_groups("otto", ["/storage"])
    sign_in_through_provider(page, live_server, "otto")
    page.goto(f"{live_server.url}/campaigns/{campaign.pk}/")
    assert page.locator("text=Start a run").count() == 0
    # A start sent anyway (as an old tab's form would) is refused with the 403 page, which names
    # the group to ask the provider's administrators for.
    with page.expect_navigation():
        page.evaluate(
            """(url) => {
                const form = Object.assign(document.createElement('form'), {method: 'post', action: url});
                const token = document.querySelector('meta[name=csrf-token]').content;
                form.append(Object.assign(document.createElement('input'),
                                          {type: 'hidden', name: 'csrfmiddlewaretoken', value: token}));
                document.body.append(form);
                form.submit();
            }""",
            f"{live_server.url}/campaigns/{campaign.pk}/start/",
        )
    assert page.inner_text("h1") == "Not allowed"
    assert "/storage/ops (operator)" in page.inner_text("#groups-hint")
    assert Run.objects.filter(campaign=campaign).count() == 1

    changes = list(
        ChangeRecord.objects.filter(object_type="auth.user", object_id=identity.user_id)
        .order_by("pk")
        .values_list("changes", flat=True)
    )
    assert [c["roles"] for c in changes] == [[[], ["operator", "viewer"]], [["operator", "viewer"], ["viewer"]]]


def test_no_mapped_group_gives_the_no_role_page_naming_what_to_ask_for(page, live_server, oidc_provider):
    sign_in_through_provider(page, live_server, "nora")
    text = page.inner_text("#no-role")
    assert "Your roles come from your groups at Test IAM" in text
    assert "/storage/ops (operator)" in text


def test_the_provider_down_gives_a_clear_page_and_the_break_glass_login_works(
    page, live_server, oidc_provider, admin_user, settings
):
    # Even with the local form hidden (STORAGEOPS_OIDC_ONLY), a provider that is down shows it.
    settings.STORAGEOPS_OIDC = oidc_provider.config(only=True)
    page.goto(f"{live_server.url}/login/")
    assert page.locator("input[name=password]").count() == 0
    oidc_provider.stop()

    page.click("#sso-sign-in")
    page.wait_for_url(re.compile(r".*/login/\?sso=unavailable$"))
    assert "Test IAM does not answer right now" in page.inner_text("#sso-message")
    assert page.locator("#sso-sign-in").count() == 0

    page.fill("input[name=username]", admin_user.username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    assert page.inner_text("span[title='Signed in']") == admin_user.username

"""The Alerts pages: subscriptions edited from the dashboard by an admin only, the deliveries
listed and filtered, webhook secrets kept off the page, and the test button delivering for real
to an SMTP server and a webhook server on loopback."""

from __future__ import annotations

import re

import pytest
from django.utils.html import escape

from alerts.models import Delivery, Subscription
from tests.support.factories import mock_campaign
from tests.support.ports import free_port

pytestmark = pytest.mark.django_db
SECRET_HOOK = "https://hooks.example.org/hooks/T0-s3cret-token?key=k3y"


def _form(**values) -> dict:
    form = {"name": "storage team", "campaign": "", "kinds": ["regression", "stall"], "email": "team@example.org",
            "webhook_url": "", "min_interval_minutes": "30", "repeat_ongoing_hours": "24", "active": "on"}  # fmt: skip
    form.update(values)
    return form


def _messages(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


def test_an_admin_creates_a_subscription_an_operator_may_not(client, admin_user, operator):
    campaign = mock_campaign("nightly")
    client.force_login(operator)
    assert client.post("/alerts/new/", _form()).status_code == 403
    assert not Subscription.objects.exists()
    client.force_login(admin_user)
    response = client.post("/alerts/new/", _form(campaign=campaign.pk), follow=True)
    assert response.redirect_chain == [("/alerts/", 302)]
    assert _messages(response) == ["Subscription storage team created."]
    created = Subscription.objects.get()
    assert (created.campaign, created.kinds, created.email, created.active) == (
        campaign, ["regression", "stall"], "team@example.org", True,
    )  # fmt: skip


def test_the_form_offers_every_kind_but_test_as_checkboxes_and_every_campaign_by_default(client, admin_user):
    client.force_login(admin_user)
    page = client.get("/alerts/new/").content.decode()
    for kind in ("regression", "run_failed", "stall", "collector_silent"):
        # Every kind is wanted unless unticked, as the model's default has it.
        assert re.search(rf'<input type="checkbox" name="kinds" value="{kind}" id="id_kinds_\d" checked>', page), kind
    assert 'value="test"' not in page
    assert '<option value="" selected>every campaign</option>' in page


@pytest.mark.parametrize(
    ("values", "field", "message"),
    [
        ({"email": "", "webhook_url": ""}, None, "Give an email address, a webhook URL, or both."),
        ({"webhook_url": "ftp://example.org/hook"}, "webhook_url", "Use an http:// or https:// URL with a host."),
        ({"kinds": ["regression", "weather"]}, "kinds", "Select a valid choice. weather is not one of"),
        # A test alert is the test button's, not something to subscribe to.
        ({"kinds": ["test"]}, "kinds", "Select a valid choice. test is not one of"),
        ({"kinds": []}, "kinds", "This field is required."),
    ],
)
def test_a_bad_subscription_is_refused_with_its_reason_and_nothing_saved(client, admin_user, values, field, message):
    client.force_login(admin_user)
    response = client.post("/alerts/new/", _form(**values))
    assert response.status_code == 400
    form = response.context["form"]
    errors = form.non_field_errors() if field is None else form.errors[field]
    assert any(e.startswith(message) for e in errors), errors
    assert message.replace("'", "&#x27;") in response.content.decode()
    assert not Subscription.objects.exists()


def test_an_admin_edits_and_deletes_a_subscription(client, admin_user, operator):
    subscription = Subscription.objects.create(name="team", email="team@example.org")
    Delivery.objects.create(subscription=subscription, kind="test", subject="Test alert", body="", state="sent")
    client.force_login(operator)
    assert client.get(f"/alerts/{subscription.pk}/edit/").status_code == 403
    assert client.post(f"/alerts/{subscription.pk}/delete/").status_code == 403
    client.force_login(admin_user)
    page = client.get(f"/alerts/{subscription.pk}/edit/")
    assert page.status_code == 200 and 'value="team@example.org"' in page.content.decode()
    response = client.post(
        f"/alerts/{subscription.pk}/edit/",
        _form(name="team", email="", webhook_url="https://chat.example.org/hooks/x", min_interval_minutes="0",
              active=""),
        follow=True,
    )  # fmt: skip
    assert _messages(response) == ["Subscription team saved."]
    subscription.refresh_from_db()
    assert (subscription.email, subscription.webhook_url, subscription.min_interval_minutes, subscription.active) == (
        "", "https://chat.example.org/hooks/x", 0, False,
    )  # fmt: skip
    # Delete is a POST: a link followed by a crawler or a prefetch deletes nothing.
    assert client.get(f"/alerts/{subscription.pk}/delete/").status_code == 405
    response = client.post(f"/alerts/{subscription.pk}/delete/", follow=True)
    assert _messages(response) == ["Subscription team deleted, with its deliveries."]
    assert not Subscription.objects.exists() and not Delivery.objects.exists()


def test_the_deliveries_are_listed_with_their_outcome_and_filtered_by_state_and_kind(client, viewer):
    campaign = mock_campaign("watched")
    team = Subscription.objects.create(name="team", campaign=campaign, email="team@example.org")

    def delivery(kind: str, state: str, subject: str, outcome: dict) -> Delivery:
        return Delivery.objects.create(subscription=team, kind=kind, campaign=campaign, subject=subject, body="",
                                       state=state, outcome=outcome)  # fmt: skip

    sent = delivery("regression", "sent", "watched regressed", {"email": "ok"})
    failed = delivery("stall", "failed", "watched stalled", {"email": "SMTPServerDisconnected: gone"})
    held = delivery("regression", "suppressed", "again", {"held_back_by": sent.pk})
    client.force_login(viewer)
    page = client.get("/alerts/").content.decode()
    assert "watched regressed" in page and "email: SMTPServerDisconnected: gone" in page
    assert f"held back by #{sent.pk}" in page and "held back (rate limit)" in page
    # A viewer sees the subscriptions, not the buttons that change them.
    assert "team@example.org" in page and "Send a test alert" not in page and "New subscription" not in page
    assert [d.pk for d in client.get("/alerts/?state=failed").context["deliveries"]] == [failed.pk]
    assert [d.pk for d in client.get("/alerts/?kind=regression").context["deliveries"]] == [held.pk, sent.pk]
    assert list(client.get("/alerts/?state=sent&kind=stall").context["deliveries"]) == []


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("state=lost", "Select a valid choice. lost is not one of the available choices."),
        ("kind=weather", "Select a valid choice. weather is not one of the available choices."),
        ("campaign=abc", "Select a valid choice. That choice is not one of the available choices."),
    ],
)
def test_a_bad_filter_is_refused_with_its_reason(client, viewer, query, message):
    client.force_login(viewer)
    response = client.get(f"/alerts/?{query}")
    assert response.status_code == 400
    assert message in response.content.decode()
    assert list(response.context["deliveries"]) == []


def test_the_deliveries_are_paginated(client, viewer):
    team = Subscription.objects.create(name="team", email="team@example.org")
    Delivery.objects.bulk_create(
        Delivery(subscription=team, kind="stall", subject=f"stall {i}", body="", state="sent") for i in range(51)
    )
    client.force_login(viewer)
    first = client.get("/alerts/?kind=stall")
    assert len(first.context["deliveries"]) == 50 and 'href="?kind=stall&amp;page=2"' in first.content.decode()
    assert len(client.get("/alerts/?kind=stall&page=2").context["deliveries"]) == 1


def test_a_viewer_sees_where_a_webhook_points_never_its_secret_path(client, viewer):
    Subscription.objects.create(name="chat", webhook_url=SECRET_HOOK)
    client.force_login(viewer)
    page = client.get("/alerts/").content.decode()
    assert "https://hooks.example.org/hooks/…?key=…" in page
    assert "s3cret" not in page and "k3y" not in page


def test_the_test_button_mails_and_posts_for_real(client, admin_user, operator, mailbox, webhook):
    url, posted = webhook
    subscription = Subscription.objects.create(name="team", email="team@example.org", webhook_url=url)
    client.force_login(operator)
    assert client.post(f"/alerts/{subscription.pk}/test/").status_code == 403
    assert not mailbox.messages and not posted
    client.force_login(admin_user)
    assert client.get(f"/alerts/{subscription.pk}/test/").status_code == 405
    response = client.post(f"/alerts/{subscription.pk}/test/", follow=True)
    assert response.redirect_chain == [("/alerts/", 302)]
    assert _messages(response) == ["Test alert sent for team: email: ok; webhook: ok."]
    [(_, to, message)] = mailbox.messages
    assert to == ["team@example.org"] and "Subject: [StorageOps] Test alert" in message
    assert "A test of subscription team." in message
    [payload] = posted
    assert payload["text"] == "**Test alert**\nA test of subscription team." and payload["props"] == {"kind": "test"}
    delivery = Delivery.objects.get()
    assert (delivery.kind, delivery.state, delivery.outcome) == ("test", "sent", {"email": "ok", "webhook": "ok"})
    # A test is never held back by the rate limit: pressing again sends again.
    client.post(f"/alerts/{subscription.pk}/test/")
    assert len(mailbox.messages) == 2 and len(posted) == 2


def test_a_failing_channel_is_named_in_the_message_and_recorded_without_the_webhook_secret(
    client, admin_user, viewer, mailbox
):
    closed = f"http://127.0.0.1:{free_port()}/hooks/T0-s3cret-token"
    subscription = Subscription.objects.create(name="team", email="team@example.org", webhook_url=closed)
    client.force_login(admin_user)
    response = client.post(f"/alerts/{subscription.pk}/test/", follow=True)
    [message] = _messages(response)
    assert message.startswith("Test alert for team failed: email: ok; webhook: ConnectionError")
    assert "error" in next(iter(response.context["messages"])).tags
    delivery = Delivery.objects.get()
    assert delivery.state == Delivery.State.FAILED and delivery.outcome["email"] == "ok"
    assert delivery.outcome["webhook"].startswith("ConnectionError") and "s3cret" not in delivery.outcome["webhook"]
    assert len(mailbox.messages) == 1, "the broken webhook does not stop the mail"
    client.force_login(viewer)
    page = client.get("/alerts/?state=failed").content.decode()
    assert "webhook: ConnectionError" in page and "s3cret" not in page


def test_the_nav_lights_alerts(client, viewer):
    client.force_login(viewer)
    page = client.get("/alerts/").content.decode()
    assert '<a href="/alerts/" aria-current="page">Alerts</a>' in page
    assert 'aria-current="page">Alerts' not in client.get("/hosts/events/").content.decode()


def test_a_campaign_filter_shows_the_subscriptions_that_alert_about_it(client, viewer):
    campaign = mock_campaign("nightly")
    Subscription.objects.create(name="own", campaign=campaign, email="own@example.org")
    Subscription.objects.create(name="site", email="site@example.org")
    Subscription.objects.create(name="other", campaign=mock_campaign("other"), email="o@example.org")
    client.force_login(viewer)
    chosen = client.get(f"/alerts/?campaign={campaign.pk}").context["subscriptions"]
    assert [s.name for s in chosen] == ["own", "site"]


def test_a_campaign_page_counts_the_active_subscriptions_that_alert_about_it(client, viewer):
    campaign = mock_campaign("nightly")
    Subscription.objects.create(name="own", campaign=campaign, email="own@example.org")
    Subscription.objects.create(name="paused", campaign=campaign, email="p@example.org", active=False)
    Subscription.objects.create(name="site", email="site@example.org")
    Subscription.objects.create(name="other", campaign=mock_campaign("other"), email="o@example.org")
    client.force_login(viewer)
    detail = client.get(campaign.get_absolute_url()).content.decode()
    link = f'<a href="/alerts/?campaign={campaign.pk}">Alerts</a>'
    assert f"{link}: 1 active subscription for this campaign (1 site-wide)." in detail


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        ("http://127.0.0.1:8080/alerts/storage", "http://127.0.0.1:8080/alerts/storage"),
        ("https://chat.site.example/hooks/8x3kq9wz1m4n5p6r7s8t9u0v1w", "https://chat.site.example/hooks/…"),
        (
            "https://hooks.slack.com/services/T0AB12/B0CD34/aBcDeFgHiJkLmNoPqRsTuVwX",
            "https://hooks.slack.com/services/…/…/…",
        ),
        ("https://user:pw@[::1]:9443/hook?token=abc&room=ops", "https://[::1]:9443/hook?token=…&room=…"),
    ],
)
def test_a_webhook_is_shown_whole_but_its_secrets(client, viewer, given, shown):
    Subscription.objects.create(name="chat", webhook_url=given)
    client.force_login(viewer)
    page = client.get("/alerts/").content.decode()
    assert f"<code>{escape(shown)}</code>" in page, page[page.find("subscriptions") : page.find("subscriptions") + 2000]

"""Alert subscriptions and deliveries through the API: validated as the pages validate them, the
webhook's secret path shown only to those who may change it, and the test action delivering for
real to an SMTP server and a webhook server on loopback."""

from __future__ import annotations

import pytest

from alerts.models import Delivery, Subscription
from campaigns.models import Run
from tests.support.api import api
from tests.support.factories import mock_campaign
from tests.support.ports import free_port

pytestmark = pytest.mark.django_db
SUBSCRIPTIONS = "/api/v1/alert-subscriptions/"
DELIVERIES = "/api/v1/alert-deliveries/"
SECRET_HOOK = "https://hooks.example.org/hooks/T0-s3cret-token?key=k3y"
NEITHER = "Give an email address, a webhook URL, or both."


def test_an_admin_subscribes_a_campaign_and_the_whole_site(admin_user):
    admin = api(admin_user, "admin")
    campaign = mock_campaign("nightly")
    body = {"name": "storage team", "campaign": campaign.pk, "kinds": ["regression", "stall"],
            "email": "team@example.org", "min_interval_minutes": 0}  # fmt: skip
    created = admin.post(SUBSCRIPTIONS, body, format="json")
    assert created.status_code == 201, created.content
    data = created.json()
    assert (data["campaign"], data["kinds"], data["email"], data["webhook_url"], data["active"]) == (
        campaign.pk, ["regression", "stall"], "team@example.org", "", True,
    )  # fmt: skip
    assert data["display"] == "storage team" and data["url"].endswith(f"{SUBSCRIPTIONS}{data['id']}/")
    site = admin.post(SUBSCRIPTIONS, {"name": "site chat", "webhook_url": SECRET_HOOK}, format="json")
    assert site.status_code == 201, site.content
    # No campaign: every campaign and the collectors; no kinds given: every kind one can subscribe to.
    assert site.json()["campaign"] is None
    assert site.json()["kinds"] == [
        "regression", "run_failed", "stall", "collector_silent", "readiness_failed", "disk_full",
    ]  # fmt: skip
    assert site.json()["webhook_url"] == SECRET_HOOK, "an admin gets the whole URL back, to edit it"
    assert set(Subscription.objects.values_list("name", flat=True)) == {"storage team", "site chat"}
    listed = admin.get(f"{SUBSCRIPTIONS}?campaign={campaign.pk}").json()["results"]
    assert [s["name"] for s in listed] == ["storage team"]


@pytest.mark.parametrize(
    ("values", "fields", "says"),
    [
        (
            {"kinds": ["regression", "weather"]},
            {"kinds"},
            "Give a non-empty list of: collector_silent, disk_full, readiness_failed, regression",
        ),
        # A test alert is the test action's, never subscribed to.
        ({"kinds": ["test"]}, {"kinds"}, "Give a non-empty list of"),
        ({"kinds": []}, {"kinds"}, "Give a non-empty list of"),
        ({"kinds": "regression"}, {"kinds"}, "Give a non-empty list of"),
        ({"webhook_url": "ftp://example.org/hook"}, {"webhook_url"}, "Use an http:// or https:// URL with a host."),
        ({"email": "", "webhook_url": ""}, {"email", "webhook_url"}, NEITHER),
        ({"email": None}, {"email"}, "This field may not be null."),
    ],
)
def test_a_bad_subscription_is_refused_naming_its_fields_and_nothing_is_saved(admin_user, values, fields, says):
    body = {"name": "team", "email": "team@example.org", **values}
    response = api(admin_user, "admin").post(SUBSCRIPTIONS, body, format="json")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert set(error["fields"]) == fields
    assert all(messages[0].startswith(says) for messages in error["fields"].values()), error
    assert not Subscription.objects.exists()


def test_a_patch_that_would_leave_no_channel_is_refused(admin_user):
    admin = api(admin_user, "admin")
    mail_only = Subscription.objects.create(name="mail", email="team@example.org")
    both = Subscription.objects.create(name="both", email="team@example.org", webhook_url=SECRET_HOOK)
    refused = admin.patch(f"{SUBSCRIPTIONS}{mail_only.pk}/", {"email": ""}, format="json")
    assert refused.status_code == 400, refused.content
    assert refused.json()["error"]["fields"] == {"email": [NEITHER], "webhook_url": [NEITHER]}
    mail_only.refresh_from_db()
    assert mail_only.email == "team@example.org"
    # The webhook left is enough.
    assert admin.patch(f"{SUBSCRIPTIONS}{both.pk}/", {"email": ""}, format="json").status_code == 200
    both.refresh_from_db()
    assert (both.email, both.webhook_url) == ("", SECRET_HOOK)


def test_only_those_who_may_change_a_subscription_see_its_webhook_secret(admin_user, operator, viewer):
    chat = Subscription.objects.create(name="chat", webhook_url=SECRET_HOOK)
    readers = [api(viewer, "viewer"), api(operator, "operator"), api(admin_user, "viewer")]
    for client in readers:
        for path in (SUBSCRIPTIONS, f"{SUBSCRIPTIONS}{chat.pk}/", f"{SUBSCRIPTIONS}?active=true"):
            response = client.get(path)
            assert response.status_code == 200, response.content
            text = response.content.decode()
            assert "https://hooks.example.org/hooks/…?key=…" in text, path
            assert "s3cret" not in text and "k3y" not in text, path
    admin = api(admin_user, "admin")
    assert admin.get(f"{SUBSCRIPTIONS}{chat.pk}/").json()["webhook_url"] == SECRET_HOOK
    assert admin.get(SUBSCRIPTIONS).json()["results"][0]["webhook_url"] == SECRET_HOOK


def test_the_test_action_mails_and_posts_for_real(admin_user, operator, mailbox, webhook):
    url, posted = webhook
    team = Subscription.objects.create(name="team", email="team@example.org", webhook_url=url)
    denied = api(operator, "operator")
    assert denied.post(f"{SUBSCRIPTIONS}{team.pk}/test/").status_code == 403
    assert denied.post(SUBSCRIPTIONS, {"name": "x", "email": "x@example.org"}, format="json").status_code == 403
    assert not mailbox.messages and not posted and not Delivery.objects.exists()
    response = api(admin_user, "admin").post(f"{SUBSCRIPTIONS}{team.pk}/test/")
    assert response.status_code == 200, response.content
    data = response.json()
    assert (data["subscription"], data["kind"], data["state"], data["outcome"]) == (
        team.pk, "test", "sent", {"email": "ok", "webhook": "ok"},
    )  # fmt: skip
    assert data["id"] == Delivery.objects.get().pk
    [(_, to, message)] = mailbox.messages
    assert to == ["team@example.org"] and "Subject: [StorageOps] Test alert" in message
    [payload] = posted
    assert payload["text"] == "**Test alert**\nA test of subscription team." and payload["props"] == {"kind": "test"}


def test_a_test_whose_webhook_fails_still_answers_200_with_the_failure(admin_user, mailbox):
    closed = f"http://127.0.0.1:{free_port()}/hooks/T0-s3cret-token"
    team = Subscription.objects.create(name="team", email="team@example.org", webhook_url=closed)
    response = api(admin_user, "admin").post(f"{SUBSCRIPTIONS}{team.pk}/test/")
    assert response.status_code == 200, response.content
    data = response.json()
    assert data["state"] == "failed" and data["outcome"]["email"] == "ok"
    assert data["outcome"]["webhook"].startswith("ConnectionError") and "s3cret" not in response.content.decode()
    assert len(mailbox.messages) == 1, "the broken webhook does not stop the mail"


def test_deliveries_are_listed_newest_first_filtered_and_a_bad_filter_is_refused(viewer):
    campaign = mock_campaign("watched")
    run = Run.objects.create(campaign=campaign, state="succeeded")
    team = Subscription.objects.create(name="team", campaign=campaign, email="team@example.org")

    def delivery(state: str, **fields) -> int:
        made = Delivery.objects.create(subscription=team, kind="regression", campaign=campaign, subject="s",
                                       body="b", state=state, **fields)  # fmt: skip
        return made.pk

    sent = delivery("sent", run=run, outcome={"email": "ok"})
    failed = delivery("failed", outcome={"email": "SMTPServerDisconnected: gone"})
    held = delivery("suppressed", run=run, outcome={"held_back_by": sent})
    client = api(viewer, "viewer")

    def ids(query: str) -> list[int]:
        response = client.get(f"{DELIVERIES}?{query}")
        assert response.status_code == 200, response.content
        return [d["id"] for d in response.json()["results"]]

    assert ids("") == [held, failed, sent]
    assert ids("state=failed") == [failed]
    assert ids(f"run={run.pk}") == [held, sent]
    assert ids(f"run={run.pk}&state=sent&subscription={team.pk}&kind=regression") == [sent]
    assert ids("kind=stall") == []
    one = client.get(f"{DELIVERIES}{failed}/").json()
    assert (one["state"], one["outcome"], one["campaign"], one["run"]) == (
        "failed", {"email": "SMTPServerDisconnected: gone"}, campaign.pk, None,
    )  # fmt: skip
    # Keyset pages: the next page is a cursor link, not an offset.
    first = client.get(f"{DELIVERIES}?limit=2").json()
    assert [d["id"] for d in first["results"]] == [held, failed] and "cursor=" in first["next"]
    assert [d["id"] for d in client.get(first["next"]).json()["results"]] == [sent]
    for query, field in (("state=lost", "state"), ("kind=weather", "kind"), ("run=abc", "run")):
        response = client.get(f"{DELIVERIES}?{query}")
        assert response.status_code == 400, (query, response.content)
        assert set(response.json()["error"]["fields"]) == {field}, query

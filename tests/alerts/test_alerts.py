"""Alerts delivered for real: mail to an SMTP server and JSON to a webhook server the test
starts on loopback ports, the rate limit holding back a repeat, a broken channel recorded."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from alerts import triggers
from alerts.models import Delivery, Subscription
from campaigns import runs
from campaigns.results import baselines
from collectors.events import log_event
from tests.support.factories import mock_campaign
from tests.support.ports import free_port

pytestmark = pytest.mark.django_db
MB = 1_000_000


def _finished(campaign, at, throughput, **fields):
    run = runs.create_run(campaign, trigger="schedule")
    run.state, run.started_at, run.finished_at = "succeeded", at - timedelta(minutes=5), at
    run.summary = {"total": {"throughput_bps": throughput, "files_ok": 10, "files_failed": 0}}
    for name, value in fields.items():
        setattr(run, name, value)
    run.summary["judgement"] = baselines.judge(run, summary=run.summary)
    run.save()
    return run


def test_a_regression_is_mailed_and_posted_once_per_interval_and_names_its_suspect(mailbox, webhook):
    url, posted = webhook
    campaign = mock_campaign("watched", file_count=10, concurrency_steps=[2])
    quiet = mock_campaign("unwatched", file_count=10, concurrency_steps=[2])
    Subscription.objects.create(name="storage team", campaign=campaign, email="storage@example.org", webhook_url=url)
    Subscription.objects.create(name="other team", campaign=quiet, email="other@example.org")
    now = timezone.now()
    history = [_finished(campaign, now - timedelta(hours=6 - i), (100 + i % 2) * MB) for i in range(5)]
    assert not [d for r in history for d in triggers.run_finished(r)], "runs within their band alert nobody"
    log_event("config_change", "door2: xrootd.chksum max 2", endpoint=campaign.destinations.first(),
              time=now - timedelta(minutes=20))  # fmt: skip
    slow = _finished(campaign, now, 70 * MB)
    [sent] = triggers.run_finished(slow)
    assert sent.state == Delivery.State.SENT and sent.outcome == {"email": "ok", "webhook": "ok"}
    [(_, to, message)] = mailbox.messages
    assert to == ["storage@example.org"] and f"Subject: [StorageOps] {slow} regressed" in message
    assert "Throughput regressed 30 %" in message
    assert "config_change on watched-dst: door2: xrootd.chksum max 2" in message
    assert "config change on" in message and f"https://storageops.example.org/campaigns/runs/{slow.pk}/" in message
    [payload] = posted
    assert payload["text"].startswith(f"**{slow} regressed**\nThroughput regressed 30 %")
    assert payload["props"] == {"kind": "regression"}
    # The next regression within the interval is kept, not sent.
    again = triggers.run_finished(_finished(campaign, now + timedelta(minutes=5), 70 * MB))
    assert [d.state for d in again] == [Delivery.State.SUPPRESSED] and len(mailbox.messages) == 1 and len(posted) == 1


def test_a_partial_scheduled_run_alerts_and_a_broken_channel_is_recorded(mailbox):
    campaign = mock_campaign("nightly-alerts", file_count=10, concurrency_steps=[2])
    Subscription.objects.create(name="site", email="site@example.org", webhook_url=f"http://127.0.0.1:{free_port()}/")
    run = _finished(campaign, timezone.now(), 50 * MB, state="partial", files_done=7, files_failed=3,
                    planned_files=10, stop_reason="3 transfers failed")  # fmt: skip
    [sent] = triggers.run_finished(run)
    # The mail went; the webhook's port had no server: the delivery says which channel failed.
    assert sent.state == Delivery.State.FAILED and sent.outcome["email"] == "ok"
    assert sent.outcome["webhook"].startswith("ConnectionError")
    mail = mailbox.messages[0][2]
    assert "ended partial" in mail and "7 of 10 transfers succeeded, 3 failed" in mail
    # A run started by hand that lost files is the operator's to see, not an alert.
    by_hand = _finished(campaign, timezone.now(), 50 * MB, state="partial", trigger="web")
    assert triggers.run_finished(by_hand) == []


def test_a_subscription_needs_a_channel_and_known_kinds():
    with pytest.raises(Exception, match="email address, a webhook URL"):
        Subscription.objects.create(name="nowhere")
    with pytest.raises(Exception, match="non-empty list"):
        Subscription.objects.create(name="odd", email="a@example.org", kinds=["weather"])
    with pytest.raises(Exception, match="http"):
        Subscription.objects.create(name="ftp", webhook_url="ftp://example.org/hook")


def test_a_silent_collector_is_told_once_per_silence_and_each_host_on_its_own(mailbox, settings):
    from collectors.models import Host

    settings.STORAGEOPS_COLLECTOR_SILENT_SECONDS = 300
    Subscription.objects.create(name="site", email="site@example.org", min_interval_minutes=0)
    # A campaign's own subscription is not told about hosts: a host serves many campaigns.
    Subscription.objects.create(name="one", email="one@example.org", campaign=mock_campaign("c1"))
    now = timezone.now()
    quiet = Host.objects.create(name="door7", last_seen=now - timedelta(minutes=12))
    other = Host.objects.create(name="door8", last_seen=now - timedelta(minutes=6))
    Host.objects.create(name="door9", last_seen=now - timedelta(seconds=30))  # heard from
    Host.objects.create(name="new-host")  # no collector yet: nothing to miss
    sent = triggers.collectors_silent(now)
    assert sorted(d.host.name for d in sent) == ["door7", "door8"]  # one host's alert holds back no other's
    assert all(d.state == Delivery.State.SENT and d.subscription.name == "site" for d in sent)
    mail = next(m for _, to, m in mailbox.messages if "door7" in m)
    assert "Subject: [StorageOps] Collector on door7 silent" in mail and "for 12 min" in mail
    assert f"https://storageops.example.org{quiet.get_absolute_url()}" in mail
    # The same silence is told once.
    assert triggers.collectors_silent(now + timedelta(minutes=1)) == []
    # Heard again, then silent again: a new silence, told again.
    Host.objects.filter(pk=quiet.pk).update(last_seen=now + timedelta(minutes=5))
    later = now + timedelta(minutes=70)
    # door7 is told again, door9 now silent too; door8's silence, unbroken, was told already.
    again = triggers.collectors_silent(later)
    assert sorted(d.host.name for d in again) == ["door7", "door9"] and other.pk not in [d.host_id for d in again]
    assert all(d.state == Delivery.State.SENT for d in again) and len(mailbox.messages) == 4


def test_the_admin_action_sends_a_test_alert_and_keeps_the_webhook_secret_out_of_its_error(
    client, admin_user, mailbox, webhook
):
    url, posted = webhook
    working = Subscription.objects.create(name="working", email="team@example.org", webhook_url=url)
    closed = f"http://127.0.0.1:{free_port()}/hooks/T0-s3cret-token?key=k3y"
    broken = Subscription.objects.create(name="broken", webhook_url=closed)
    client.force_login(admin_user)
    response = client.post(
        "/admin/alerts/subscription/", {"action": "send_test", "_selected_action": [working.pk, broken.pk]}, follow=True
    )
    shown = {str(m).split(":")[0]: str(m) for m in response.context["messages"]}
    assert shown["working"] == "working: sent, email: ok; webhook: ok"
    assert shown["broken"].startswith("broken: failed, webhook: ConnectionError")
    assert len(mailbox.messages) == 1 and posted[0]["props"] == {"kind": "test"}
    # requests names the URL's path in its error; the recorded outcome keeps the host only.
    error = Delivery.objects.get(subscription=broken).outcome["webhook"]
    assert "s3cret" not in error and "k3y" not in error and "/…" in error


def test_a_lasting_regression_is_told_at_its_start_again_daily_and_at_its_recovery(mailbox, webhook):
    """Issue 34: the first slowed run alerts with its figure, value, band, median, suspect and
    link; the runs after it are the same regression, held back until the subscription's repeat
    interval passed; the first run back within its band alerts once, as recovered."""
    url, posted = webhook
    campaign = mock_campaign("lasting", file_count=10, concurrency_steps=[2])
    Subscription.objects.create(name="team", campaign=campaign, email="team@example.org", webhook_url=url,
                                min_interval_minutes=0, repeat_ongoing_hours=24)  # fmt: skip
    now = timezone.now()
    for i in range(4):
        _finished(campaign, now - timedelta(hours=6 - i), (100 + i % 2) * MB)
    change = log_event("config_change", "throttle 20 MB/s", endpoint=campaign.destinations.first(),
                       time=now - timedelta(minutes=30))  # fmt: skip
    first = _finished(campaign, now, 20 * MB)
    [sent] = triggers.run_finished(first)
    assert sent.state == Delivery.State.SENT and sent.kind == "regression"
    mail = mailbox.messages[0][2]
    assert "throughput: 20 MB/s, band 95.5 MB/s – 106 MB/s (median 100 MB/s of 4 runs): regressed" in mail
    assert f"{change.time:%Y-%m-%d %H:%M} UTC config_change on lasting-dst: throttle 20 MB/s" in mail
    assert f"https://storageops.example.org/campaigns/runs/{first.pk}/" in mail
    later = [_finished(campaign, now + timedelta(minutes=10 * (i + 1)), 20 * MB) for i in range(3)]
    held = [d for run in later for d in triggers.run_finished(run)]
    assert [d.state for d in held] == [Delivery.State.SUPPRESSED] * 3 and len(mailbox.messages) == 1
    assert f"(ongoing since run #{first.pk})" in held[-1].subject
    # A day later the regression still lasts: told again, once.
    Delivery.objects.filter(state=Delivery.State.SENT).update(time=now - timedelta(hours=25))
    repeat = _finished(campaign, now + timedelta(minutes=40), 20 * MB)
    again = triggers.run_finished(repeat)
    assert [d.state for d in again] == [Delivery.State.SENT] and len(mailbox.messages) == 2
    assert f"regressed (ongoing since run #{first.pk})" in mailbox.messages[1][2]
    assert f"(ongoing since run #{first.pk}, 5 runs)" in mailbox.messages[1][2]
    assert "throttle 20 MB/s" in mailbox.messages[1][2]  # the suspect found at its start
    back = _finished(campaign, now + timedelta(minutes=50), 100 * MB)
    [recovered] = triggers.run_finished(back)
    assert recovered.kind == "recovered" and recovered.state == Delivery.State.SENT
    assert f"Recovered: the regression since run #{first.pk} lasted 5 runs." in mailbox.messages[2][2]
    assert posted[-1]["props"] == {"kind": "recovered"} and len(posted) == 3
    # The next run within its band is quiet.
    assert triggers.run_finished(_finished(campaign, now + timedelta(minutes=60), 100 * MB)) == []


def test_a_check_that_meets_the_database_down_is_tried_again_and_tells_the_silence(mailbox, settings, monkeypatch):
    # Beat's check of one minute met PostgreSQL restarting (as in the soak): the silence it
    # would have told must not wait for a check that may find the collector heard again.
    from django.db import OperationalError

    from alerts import tasks
    from collectors.models import Host

    settings.STORAGEOPS_COLLECTOR_SILENT_SECONDS = 60
    Subscription.objects.create(name="site", email="site@example.org", min_interval_minutes=0)
    Host.objects.create(name="door5", last_seen=timezone.now() - timedelta(minutes=2))
    check = triggers.collectors_silent
    tries = []

    def database_down_once(now=None):
        tries.append(timezone.now())
        if len(tries) == 1:
            raise OperationalError('connection to server at "127.0.0.1" failed: Connection refused')
        return check(now)

    monkeypatch.setattr(triggers, "collectors_silent", database_down_once)
    result = tasks.collectors_silent.apply()
    assert result.successful(), result.traceback
    assert result.result == 1 and len(tries) == 2
    assert "Collector on door5 silent" in mailbox.messages[0][2]

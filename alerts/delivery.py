"""Send an alert to every subscription that asks for it, by email and by webhook, rate limited.

A channel that fails (an SMTP server down, a webhook answering 500) is recorded with its error
and never stops the other channels or subscriptions: an alert is a side effect of a run, and
must not fail it.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from urllib.parse import urlsplit

import requests
from django.conf import settings
from django.core.mail import send_mail
from django.db.models import Q
from django.utils import timezone

from alerts.models import AlertKind, Delivery, Subscription, shown_path, shown_url

log = logging.getLogger(__name__)
WEBHOOK_TIMEOUT = 10.0


def notify(
    kind: str, subject: str, body: str, *, campaign=None, run=None, host=None, ongoing: bool = False
) -> list[Delivery]:
    """One delivery per active subscription of `kind` for `campaign` (or for every campaign; an
    alert about a host, with no campaign, goes to the site-wide subscriptions). A recovery goes
    to the subscriptions of regression. `ongoing`: a regression that began in an earlier run."""
    wanted = Subscription.objects.filter(active=True).filter(Q(campaign__isnull=True) | Q(campaign=campaign))
    asked = AlertKind.REGRESSION if kind == AlertKind.RECOVERED else kind
    return [
        send(s, kind, subject, body, campaign=campaign, run=run, host=host, ongoing=ongoing)
        for s in wanted
        if asked in s.kinds
    ]


def send(
    subscription: Subscription,
    kind: str,
    subject: str,
    body: str,
    *,
    campaign=None,
    run=None,
    host=None,
    ongoing: bool = False,
) -> Delivery:
    """Send now unless the same kind about the same campaign (or host) went out within the interval;
    an ongoing regression only once its subscription's repeat interval passed since the last one."""
    minutes = max(subscription.min_interval_minutes, subscription.repeat_ongoing_hours * 60 if ongoing else 0)
    since = timezone.now() - timedelta(minutes=minutes)
    recent = Delivery.objects.filter(
        subscription=subscription, kind=kind, campaign=campaign, host=host, state=Delivery.State.SENT, time__gte=since
    )
    delivery = Delivery(subscription=subscription, kind=kind, campaign=campaign, run=run, host=host,
                        subject=subject[:300], body=body)  # fmt: skip
    held_by = recent.first() if kind != AlertKind.TEST and minutes else None
    if held_by is not None:
        delivery.state = Delivery.State.SUPPRESSED
        delivery.outcome = {"held_back_by": held_by.pk}
        delivery.save()
        return delivery
    outcome = {}
    if subscription.email:
        outcome["email"] = _channel(lambda: _email(subscription.email, subject, body))
    if subscription.webhook_url:
        url = subscription.webhook_url
        outcome["webhook"] = _without_url(_channel(lambda: _webhook(url, subject, body, kind)), url)
    delivery.outcome = outcome
    delivery.state = Delivery.State.SENT if all(v == "ok" for v in outcome.values()) else Delivery.State.FAILED
    delivery.save()
    return delivery


def send_test(subscription: Subscription) -> Delivery:
    """A test alert through every channel of the subscription now (never held back), recorded as any other."""
    return send(subscription, AlertKind.TEST, "Test alert", f"A test of subscription {subscription}.")


def describe(delivery: Delivery) -> str:
    """Each channel's outcome in words, for a message to whoever sent the alert."""
    if delivery.state == Delivery.State.SUPPRESSED:
        return f"held back by the rate limit (delivery #{delivery.outcome.get('held_back_by')} went out recently)"
    return "; ".join(f"{channel}: {result}" for channel, result in delivery.outcome.items()) or "no channel"


def _without_url(result: str, url: str) -> str:
    # A webhook's path or query is its secret, and requests names them in its errors; the
    # outcome is shown to every viewer of the Alerts page, so its secrets are masked there too.
    parts = urlsplit(url)
    hidden = parts.path + (f"?{parts.query}" if parts.query else "")
    result = result.replace(url, shown_url(url))
    return result.replace(hidden, shown_path(url)) if len(hidden) > 1 else result


def _channel(send_one) -> str:
    try:
        send_one()
    except (OSError, requests.RequestException) as exc:
        log.warning("alert not delivered: %s", exc)
        return f"{type(exc).__name__}: {exc}"[:500]
    return "ok"


def _email(address: str, subject: str, body: str) -> None:
    send_mail(f"[StorageOps] {subject}", body, settings.DEFAULT_FROM_EMAIL, [address])


def _webhook(url: str, subject: str, body: str, kind: str) -> None:
    # Mattermost's and Slack's incoming webhooks both read "text"; Mattermost keeps "props".
    payload = {"username": "StorageOps", "text": f"**{subject}**\n{body}", "props": {"kind": kind}}
    response = requests.post(url, json=payload, timeout=WEBHOOK_TIMEOUT)
    response.raise_for_status()

"""What alerts adds to a campaign's page (campaigns.web.campaign_extras): how many active
subscriptions alert about the campaign, and how many about the whole site."""

from __future__ import annotations

from django.db.models import Count, Q

from alerts.models import Subscription
from campaigns.models import Campaign


def alert_counts(campaign: Campaign) -> dict[str, int]:
    return Subscription.objects.filter(active=True).aggregate(
        own=Count("pk", filter=Q(campaign=campaign)), site=Count("pk", filter=Q(campaign__isnull=True))
    )

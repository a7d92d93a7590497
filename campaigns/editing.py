"""Changing campaigns on behalf of a person: the service the pages and the API share."""

from __future__ import annotations

from django.db import transaction

from campaigns.models import Campaign


def clone_campaign(original: Campaign, name: str) -> Campaign:
    """A copy of the campaign, endpoints included, under a new name (validated like any save)."""
    with transaction.atomic():
        copy = Campaign.objects.get(pk=original.pk)
        copy.pk = None
        copy.name = name
        copy.save()
        copy.sources.set(original.sources.all())
        copy.destinations.set(original.destinations.all())
    return copy

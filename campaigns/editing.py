"""Changing campaigns on behalf of a person: the service the pages and the API share."""

from __future__ import annotations

import dataclasses

from django.db import transaction

from campaigns.models import Campaign, campaign_rules


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


class CampaignRelationRules:
    """For a ModelForm of Campaign: the model's own rules first (full_clean on the instance built
    from the form), then those against the endpoints and clients the form is about to save (one
    set of rules, campaign_rules, which the API applies too): the page's form and the admin's."""

    def _post_clean(self) -> None:
        super()._post_clean()
        data = self.cleaned_data
        related = ("sources", "destinations", "clients")
        given = {name: list(data[name]) for name in related if name in self.fields and name in data}
        relations = dataclasses.replace(campaign_rules.Relations.saved(self.instance), **given)
        for name, problem in campaign_rules.relation_errors(self.instance, relations).items():
            if name in related and name in self.fields and name not in data:
                continue  # the field's own error is said already
            if not self.has_error(name):
                self.add_error(name if name in self.fields else None, problem)

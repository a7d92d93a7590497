"""Forms of the Alerts pages: a subscription, and the filters of the deliveries list."""

from __future__ import annotations

from django import forms
from django.db.models import Q, QuerySet

from alerts.models import NOT_SUBSCRIBABLE, AlertKind, Delivery, Subscription, default_kinds
from campaigns.models import Campaign

# A test alert is sent by the test button, a recovery to whoever wants regressions: neither is subscribed to.
SUBSCRIBABLE_KINDS = [(k.value, k.label) for k in AlertKind if k not in NOT_SUBSCRIBABLE]


class SubscriptionForm(forms.ModelForm):
    # Declared, so the model field's default is not its initial value any more: given again.
    kinds = forms.MultipleChoiceField(
        choices=SUBSCRIBABLE_KINDS, widget=forms.CheckboxSelectMultiple, initial=default_kinds
    )

    class Meta:
        model = Subscription
        fields = ["name", "campaign", "kinds", "email", "webhook_url", "min_interval_minutes", "repeat_ongoing_hours",
                  "active"]  # fmt: skip
        labels = {"webhook_url": "Webhook URL", "min_interval_minutes": "Minimum interval (minutes)"}

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["campaign"].empty_label = "every campaign"


class DeliveryFilterForm(forms.Form):
    """GET filters of the deliveries list; a value outside the choices is refused, not ignored."""

    state = forms.ChoiceField(choices=[("", "any"), *Delivery.State.choices], required=False)
    kind = forms.ChoiceField(choices=[("", "any"), *AlertKind.choices], required=False)
    campaign = forms.ModelChoiceField(Campaign.objects.all(), required=False, empty_label="any")

    def deliveries(self) -> QuerySet[Delivery]:
        data = self.cleaned_data
        chosen = {name: data[name] for name in ("state", "kind", "campaign") if data[name]}
        return Delivery.objects.filter(**chosen).select_related("subscription", "campaign", "run__campaign", "host")

    def subscriptions(self) -> QuerySet[Subscription]:
        """The subscriptions the chosen campaign is alerted to: its own and the site-wide ones."""
        self.is_valid()  # cleaned_data keeps the fields that are valid, the campaign among them or not
        campaign = self.cleaned_data.get("campaign")
        wanted = Subscription.objects.select_related("campaign")
        return wanted.filter(Q(campaign=campaign) | Q(campaign__isnull=True)) if campaign else wanted

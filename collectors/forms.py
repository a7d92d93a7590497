"""Forms of the collectors app: an operator logs a change, a note or a deploy."""

from __future__ import annotations

from django import forms
from django.utils import timezone

from campaigns.models import Backend, Endpoint
from collectors.choices import EventKind
from collectors.models import Host

OPERATOR_KINDS = [
    (k.value, k.label)
    for k in (EventKind.NOTE, EventKind.CONFIG_CHANGE, EventKind.SERVICE_RESTART, EventKind.DEPLOY, EventKind.REBOOT)
]


class EventForm(forms.Form):
    kind = forms.ChoiceField(choices=OPERATOR_KINDS, initial=EventKind.NOTE)
    time = forms.DateTimeField(
        initial=timezone.now, help_text="When it happened (defaults to now).", widget=forms.DateTimeInput()
    )
    host = forms.ModelChoiceField(Host.objects.all(), required=False)
    backend = forms.ModelChoiceField(Backend.objects.all(), required=False)
    endpoint = forms.ModelChoiceField(Endpoint.objects.all(), required=False)
    summary = forms.CharField(max_length=300, help_text='e.g. "raised xrootd.chksum max 16 -> 48 on door2"')
    detail = forms.CharField(widget=forms.Textarea(attrs={"rows": 4}), required=False, max_length=65536)

    def clean_time(self):
        value = self.cleaned_data["time"]
        if value > timezone.now() + timezone.timedelta(minutes=5):
            raise forms.ValidationError("An event cannot be logged in the future.")
        return value

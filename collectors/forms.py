"""Forms of the collectors app: an operator logs a change, a note or a deploy."""

from __future__ import annotations

from django import forms
from django.utils import timezone

from collectors import hosttest_series, references
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
    # Backends and endpoints belong to campaigns, above: their choices come from its resolvers.
    backend = forms.TypedChoiceField(
        choices=lambda: [("", "---------"), *references.choices("backend")], coerce=int, required=False,
        empty_value=None,
    )  # fmt: skip
    endpoint = forms.TypedChoiceField(
        choices=lambda: [("", "---------"), *references.choices("endpoint")], coerce=int, required=False,
        empty_value=None,
    )  # fmt: skip
    summary = forms.CharField(max_length=300, help_text='e.g. "raised xrootd.chksum max 16 -> 48 on door2"')
    detail = forms.CharField(widget=forms.Textarea(attrs={"rows": 4}), required=False, max_length=65536)

    def clean_time(self):
        value = self.cleaned_data["time"]
        if value > timezone.now() + timezone.timedelta(minutes=5):
            raise forms.ValidationError("An event cannot be logged in the future.")
        return value


class HostTestForm(forms.Form):
    """A host-test series from the host page; collectors.hosttest_series.validate has the last word."""

    tool = forms.ChoiceField(choices=[("dd", "dd"), ("fio", "fio")], initial="dd")
    name = forms.CharField(max_length=64, initial="series", help_text="Letters, digits, '_' and '-'.")
    rw = forms.ChoiceField(
        label="I/O", choices=[(m, m) for m in ("write", "read", "randread", "randwrite", "readwrite", "randrw")],
        initial="read", help_text="dd: write, or read (each repeat writes a file, then reads it).",
    )  # fmt: skip
    size = forms.CharField(initial="1G", help_text="Per file, as dd and fio take it: 64M, 1G, 4294967296.")
    block_size = forms.CharField(initial="1M", help_text="Any size the tools take: 4k, 1M, 10M.")
    repeats = forms.IntegerField(min_value=1, initial=10)
    cold = forms.BooleanField(
        required=False, initial=True, label="Cold reads",
        help_text="Drop the file's pages from the page cache before reading it back.",
    )  # fmt: skip
    reference = forms.BooleanField(
        required=False, initial=True, label="Direct-I/O reference read (dd)",
        help_text="Also read each file with O_DIRECT: the device's own figure, against which a cached read shows.",
    )  # fmt: skip
    direct = forms.BooleanField(required=False, label="Direct I/O for the test itself")
    byte_budget = forms.CharField(
        required=False, help_text="The most the series may write, e.g. 50T; empty: the site's limit."
    )
    rolling = forms.IntegerField(min_value=1, max_value=10_000, initial=50, label="Rolling mean over (results)")

    def params(self) -> dict:
        data = self.cleaned_data
        params = {
            k: data[k] for k in ("tool", "name", "rw", "size", "block_size", "repeats", "cold", "direct", "rolling")
        }
        params["reference"] = data["reference"] and data["tool"] == "dd"
        if data.get("byte_budget"):
            params["byte_budget"] = data["byte_budget"]
        return params

    def clean(self):
        data = super().clean()
        if not self.errors:
            try:
                hosttest_series.validate(self.params())
            except forms.ValidationError as exc:
                raise forms.ValidationError(exc.messages) from None
        return data

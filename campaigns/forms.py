"""Forms of the campaigns app: a campaign's schedule, edited on the campaign's page."""

from __future__ import annotations

from django import forms

from campaigns.models import SCHEDULE_SETTINGS, CampaignSchedule


class CampaignScheduleForm(forms.ModelForm):
    class Meta:
        model = CampaignSchedule
        fields = list(SCHEDULE_SETTINGS)
        widgets = {
            "window_start": forms.TimeInput(attrs={"type": "time"}, format="%H:%M"),
            "window_end": forms.TimeInput(attrs={"type": "time"}, format="%H:%M"),
        }

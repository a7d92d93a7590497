"""Forms of the campaigns app: a campaign's schedule, edited on the campaign's page."""

from __future__ import annotations

from django import forms

from campaigns.models import CampaignSchedule


class CampaignScheduleForm(forms.ModelForm):
    class Meta:
        model = CampaignSchedule
        fields = [
            "enabled",
            "kind",
            "cron",
            "interval_minutes",
            "time_zone",
            "window_days",
            "window_start",
            "window_end",
            "max_slip_minutes",
            "max_runs",
        ]
        widgets = {
            "window_start": forms.TimeInput(attrs={"type": "time"}, format="%H:%M"),
            "window_end": forms.TimeInput(attrs={"type": "time"}, format="%H:%M"),
        }

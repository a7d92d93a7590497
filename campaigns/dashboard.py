"""What the home page shows: live runs, recent runs, the last events, collector health.

The campaigns app's page (it sits above collectors and reads both), served at "/".
"""

from __future__ import annotations

from campaigns.choices import ACTIVE_RUN_STATES
from campaigns.models import Run
from collectors.models import Event, Host


def home_context() -> dict:
    runs = Run.objects.select_related("campaign")
    return {
        "live_runs": list(runs.filter(state__in=ACTIVE_RUN_STATES)[:20]),
        "recent_runs": list(runs.exclude(state__in=ACTIVE_RUN_STATES)[:10]),
        "events": list(Event.objects.select_related("host")[:15]),
        "hosts": list(Host.objects.all()[:50]),
    }

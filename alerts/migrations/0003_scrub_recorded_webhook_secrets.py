"""Cut webhook paths out of the errors already recorded in deliveries.

Deliveries are now shown to every viewer on the Alerts page, and requests names a webhook's
URL (or its path: "Max retries exceeded with url: /hooks/…") in its errors. New errors are
recorded without it (alerts.delivery); this cleans the ones recorded before. Self-contained,
as a migration must be: it keeps working whatever the app's code becomes.
"""

import re
from urllib.parse import urlsplit

from django.db import migrations

_FULL_URL = re.compile(r"(https?://[^/\s'\"]+)/[^\s'\")]*")
_PATH_AFTER_URL = re.compile(r"(with url: )/[^\s'\")]*")


def _scrubbed(text: str, url: str) -> str:
    parts = urlsplit(url)
    secret = parts.path + (f"?{parts.query}" if parts.query else "")
    if len(secret) > 1:
        text = text.replace(secret, "/…")
    return _PATH_AFTER_URL.sub(r"\1/…", _FULL_URL.sub(r"\1/…", text))


def scrub(apps, schema_editor):
    Delivery = apps.get_model("alerts", "Delivery")
    failed = Delivery.objects.filter(outcome__has_key="webhook").exclude(outcome__webhook="ok")
    for delivery in failed.select_related("subscription").iterator():
        text = delivery.outcome["webhook"]
        cleaned = _scrubbed(str(text), delivery.subscription.webhook_url or "")
        if cleaned != text:
            delivery.outcome = {**delivery.outcome, "webhook": cleaned}
            delivery.save(update_fields=["outcome"])


class Migration(migrations.Migration):
    dependencies = [("alerts", "0002_delivery_host_collector_silent")]

    operations = [migrations.RunPython(scrub, migrations.RunPython.noop)]

"""Webhook URLs sealed at rest (storageops.sealed): a webhook's path or query is its secret. The
column becomes a SealedCharField (a text column: the sealed form is longer than the 500
characters the URL may have), and the URLs stored in the clear before are sealed with the first
key of STORAGEOPS_SECRETS_KEY(_FILE); backwards, opened and stored in the clear again. A
database with no webhook needs no key either way.

The sealing and opening are the field's own (its class is named below, as any field's is): a
value written through the field is sealed, read through it is opened; a Value is written as it
is. What is sealed is told by the stored text's "sealed:" prefix.
"""

from django.db import migrations, models
from django.db.models import ExpressionWrapper, F, Value

import storageops.sealed
import storageops.validators


def stored_values(model, name):
    """(pk, the text the column holds) of the rows with a value, read past the field."""
    raw = ExpressionWrapper(F(name), output_field=models.TextField())
    return list(model._base_manager.exclude(**{name: ""}).annotate(stored=raw).values_list("pk", "stored"))


def seal_urls(apps, schema_editor):
    Subscription = apps.get_model("alerts", "Subscription")
    for pk, stored in stored_values(Subscription, "webhook_url"):
        if not stored.startswith("sealed:"):
            Subscription.objects.filter(pk=pk).update(webhook_url=stored)  # through the field: sealed


def unseal_urls(apps, schema_editor):
    Subscription = apps.get_model("alerts", "Subscription")
    for pk, stored in stored_values(Subscription, "webhook_url"):
        if stored.startswith("sealed:"):
            clear = Subscription.objects.values_list("webhook_url", flat=True).get(pk=pk)  # through the field: opened
            Subscription.objects.filter(pk=pk).update(webhook_url=Value(clear, output_field=models.TextField()))


class Migration(migrations.Migration):
    dependencies = [
        ("alerts", "0005_readiness_failed_kind"),
    ]

    operations = [
        migrations.AlterField(
            model_name="subscription",
            name="webhook_url",
            field=storageops.sealed.SealedCharField(
                blank=True,
                help_text='A Mattermost or Slack incoming webhook: JSON {"text": …} is POSTed to it.',
                max_length=500,
                validators=[storageops.validators.validate_http_url],
            ),
        ),
        migrations.RunPython(seal_urls, unseal_urls),
    ]

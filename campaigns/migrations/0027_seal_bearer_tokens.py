"""The bearer tokens of endpoints and FTS instances sealed at rest (storageops.sealed): the
columns become SealedTextField, and the tokens stored in the clear before are sealed with the
first key of STORAGEOPS_SECRETS_KEY(_FILE). Backwards, they are opened and stored in the clear
again. A database with no token needs no key either way.

The sealing and opening are the field's own (its class is named below, as any field's is): a
value written through the field is sealed, read through it is opened; a Value is written as it
is. What is sealed is told by the stored text's "sealed:" prefix.
"""

from django.db import migrations, models
from django.db.models import ExpressionWrapper, F, Value

import storageops.sealed

SEALED = [("campaigns.Endpoint", "bearer_token"), ("campaigns.FtsInstance", "bearer_token")]


def stored_values(model, name):
    """(pk, the text the column holds) of the rows with a value, read past the field."""
    raw = ExpressionWrapper(F(name), output_field=models.TextField())
    return list(model._base_manager.exclude(**{name: ""}).annotate(stored=raw).values_list("pk", "stored"))


def seal_tokens(apps, schema_editor):
    for label, name in SEALED:
        model = apps.get_model(label)
        for pk, stored in stored_values(model, name):
            if not stored.startswith("sealed:"):
                model._base_manager.filter(pk=pk).update(**{name: stored})  # through the field: sealed


def unseal_tokens(apps, schema_editor):
    for label, name in SEALED:
        model = apps.get_model(label)
        for pk, stored in stored_values(model, name):
            if stored.startswith("sealed:"):
                clear = model._base_manager.values_list(name, flat=True).get(pk=pk)  # through the field: opened
                model._base_manager.filter(pk=pk).update(**{name: Value(clear, output_field=models.TextField())})


class Migration(migrations.Migration):
    dependencies = [
        ("campaigns", "0026_run_started_by"),
    ]

    operations = [
        migrations.AlterField(
            model_name="endpoint",
            name="bearer_token",
            field=storageops.sealed.SealedTextField(
                blank=True, help_text="Bearer token sent to this endpoint (write-only)."
            ),
        ),
        migrations.AlterField(
            model_name="ftsinstance",
            name="bearer_token",
            field=storageops.sealed.SealedTextField(
                blank=True, help_text="OIDC access token sent as Bearer (write-only)."
            ),
        ),
        migrations.RunPython(seal_tokens, unseal_tokens),
    ]

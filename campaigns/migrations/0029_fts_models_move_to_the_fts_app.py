"""FtsInstance and FtsLinkLimit leave the campaigns app for the FTS engine's own app (label
"fts", campaigns.runs.engines.fts). Only Django's state changes here: the tables stay as they
are, with their rows, and fts 0001 takes them over under the same names."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("campaigns", "0028_token_issuers"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="FtsLinkLimit"),
                migrations.DeleteModel(name="FtsInstance"),
            ],
            database_operations=[],
        ),
    ]

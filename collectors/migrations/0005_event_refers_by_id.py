"""Event's backend, endpoint and run become plain indexed ids: no foreign key up to campaigns.

The columns (backend_id, endpoint_id, run_id: bigint, nullable, indexed) and their values stay
as they are; only the foreign key constraints go, so that collectors' schema no longer depends
on campaigns' (the squashed 0001_squashed_0005 builds the same table without them). The
foreign keys first lose their constraint (the column and its index are kept), then the state
swaps each for the integer field of the same column.
"""

from django.db import migrations, models

REFERENCES = (("backend", "campaigns.backend"), ("endpoint", "campaigns.endpoint"), ("run", "campaigns.run"))


class Migration(migrations.Migration):
    # No dependency on campaigns (the squashed migration replacing this one would inherit it):
    # a database running this migration has campaigns' models from collectors 0001's time.
    dependencies = [
        ("collectors", "0004_host_client_role_and_weight"),
    ]

    operations = [
        *(
            migrations.AlterField(
                model_name="event",
                name=name,
                field=models.ForeignKey(
                    null=True,
                    blank=True,
                    db_constraint=False,
                    on_delete=models.SET_NULL,
                    related_name="events",
                    to=to,
                ),
            )
            for name, to in REFERENCES
        ),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                *(migrations.RemoveField(model_name="event", name=name) for name, _ in REFERENCES),
                *(
                    migrations.AddField(
                        model_name="event",
                        name=f"{name}_id",
                        field=models.BigIntegerField(blank=True, db_index=True, null=True),
                    )
                    for name, _ in REFERENCES
                ),
            ],
        ),
    ]

"""FTS's ids of a transfer move out of Transfer into FtsTransfer: the table (its foreign key
cascading in the database), then a copy of every transfer that has either id (campaigns 0030
drops the columns after it). Backwards, the ids are written back into the columns, which
reversing campaigns 0030 has restored first.

One INSERT ... SELECT and one UPDATE ... FROM: a site keeps millions of transfers, which rows
read into Python would take far longer to move."""

import django.db.models.deletion
from django.db import migrations, models


def _tables(apps, schema_editor) -> tuple[str, str]:
    quote = schema_editor.quote_name
    return (
        quote(apps.get_model("campaigns", "Transfer")._meta.db_table),
        quote(apps.get_model("fts", "FtsTransfer")._meta.db_table),
    )


def copy_forwards(apps, schema_editor) -> None:
    transfers, fts = _tables(apps, schema_editor)
    # The table names are the historical models' own, quoted: nothing of a user's is in the SQL.
    schema_editor.execute(
        f"INSERT INTO {fts} (transfer_id, job_id, file_id) "  # noqa: S608
        f"SELECT id, fts_job_id, fts_file_id FROM {transfers} "
        "WHERE fts_job_id <> '' OR fts_file_id IS NOT NULL"
    )


def copy_backwards(apps, schema_editor) -> None:
    transfers, fts = _tables(apps, schema_editor)
    schema_editor.execute(
        f"UPDATE {transfers} AS t SET fts_job_id = f.job_id, fts_file_id = f.file_id "  # noqa: S608
        f"FROM {fts} AS f WHERE f.transfer_id = t.id"
    )


class Migration(migrations.Migration):
    dependencies = [
        ("campaigns", "0029_fts_models_move_to_the_fts_app"),
        ("fts", "0001_initial"),
    ]

    operations = [
        migrations.CreateModel(
            name="FtsTransfer",
            fields=[
                (
                    "transfer",
                    models.OneToOneField(
                        db_constraint=False,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        primary_key=True,
                        related_name="fts",
                        serialize=False,
                        to="campaigns.transfer",
                    ),
                ),
                ("job_id", models.CharField(blank=True, default="", max_length=64, verbose_name="FTS job id")),
                ("file_id", models.BigIntegerField(blank=True, null=True, verbose_name="FTS file id")),
            ],
            options={
                "verbose_name": "FTS transfer",
            },
        ),
        # The database's cascade, not Django's (FtsTransfer.transfer says why).
        migrations.RunSQL(
            "ALTER TABLE fts_ftstransfer ADD CONSTRAINT fts_ftstransfer_transfer_fk FOREIGN KEY (transfer_id) "
            "REFERENCES campaigns_transfer (id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED",
            reverse_sql="ALTER TABLE fts_ftstransfer DROP CONSTRAINT fts_ftstransfer_transfer_fk",
        ),
        migrations.RunPython(copy_forwards, copy_backwards),
    ]

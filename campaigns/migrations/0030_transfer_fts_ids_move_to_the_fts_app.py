"""Transfer's FTS columns go: fts 0002 has copied them into FtsTransfer, the FTS app's table of
what FTS said of each transfer. Reversed, they come back empty (the job id with its database
default) and fts 0002's reverse fills them again."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("campaigns", "0029_fts_models_move_to_the_fts_app"),
        # The copy runs before the columns it reads are dropped.
        ("fts", "0002_ftstransfer"),
    ]

    operations = [
        migrations.RemoveField(model_name="transfer", name="fts_job_id"),
        migrations.RemoveField(model_name="transfer", name="fts_file_id"),
    ]

"""Build the time buckets of the runs recorded before buckets were written with the records.

Once, at the upgrade, rather than on the first page that asks: a run of a million copies takes
about a minute to bucket on a 2-core machine, longer than a web request may take. Runs whose
rows retention deleted get no bucket (their stored results stay what pages read).
"""

from django.db import migrations


def build(apps, schema_editor):
    from campaigns.models import buckets

    # Every run that has rows now was recorded before this migration: each run after it gets
    # its buckets as its copies are recorded.
    Transfer = apps.get_model("campaigns", "Transfer")
    for run_id in Transfer.objects.order_by("run_id").values_list("run_id", flat=True).distinct():
        buckets.rebuild(run_id)


class Migration(migrations.Migration):
    dependencies = [("campaigns", "0012_transfer_buckets")]

    operations = [migrations.RunPython(build, migrations.RunPython.noop, elidable=True)]

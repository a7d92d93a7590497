"""Build the time buckets of the runs recorded before buckets were written with the records.

Once, at the upgrade, rather than on the first page that asks: a run of a million copies takes
about a minute to bucket on a 2-core machine, longer than a web request may take. Runs whose
rows retention deleted get no bucket (their stored results stay what pages read).
"""

from django.db import migrations


def build(apps, schema_editor):
    from campaigns.models import buckets

    Run = apps.get_model("campaigns", "Run")
    Transfer = apps.get_model("campaigns", "Transfer")
    pending = list(Run.objects.filter(bucketed=False).order_by("pk").values_list("pk", flat=True))
    for run_id in pending:
        if Transfer.objects.filter(run_id=run_id).exists():
            buckets.rebuild(run_id)
        else:
            Run.objects.filter(pk=run_id).update(bucketed=True)


class Migration(migrations.Migration):
    dependencies = [("campaigns", "0012_transfer_buckets")]

    operations = [migrations.RunPython(build, migrations.RunPython.noop, elidable=True)]

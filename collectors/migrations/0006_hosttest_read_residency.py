"""Host-test reads: the page-cache residency measured before each read, and "faster than direct
I/O" as its own flag.

Results flagged cached before this were flagged by speed alone (more than twice the series'
direct reads), without knowing whether their pages were resident. In a cold series (their pages
dropped before the read) such a flag proved speed, not the page cache: those rows move to
faster_than_direct, with their evidence, and lose the cached flag. Warm reads (cold off) stay
cached. Their residency was never measured and stays null.
"""

from django.db import migrations, models

SPEED_EVIDENCE = "the direct-I/O reads of this series"


def speed_flags_of_cold_series(apps, schema_editor):
    result_model = apps.get_model("collectors", "HostTestResult")
    rows = result_model.objects.filter(cached=True, cached_reason__contains=SPEED_EVIDENCE).select_related("series")
    for row in rows.iterator():
        params = row.series.params if isinstance(row.series.params, dict) else {}
        if params.get("cold", True) is False:
            continue
        row.faster_than_direct, row.faster_reason = True, row.cached_reason
        row.cached, row.cached_reason = False, ""
        row.save(update_fields=["cached", "cached_reason", "faster_than_direct", "faster_reason"])


def speed_flags_back(apps, schema_editor):
    result_model = apps.get_model("collectors", "HostTestResult")
    for row in result_model.objects.filter(faster_than_direct=True).iterator():
        row.cached, row.cached_reason = True, row.faster_reason
        row.save(update_fields=["cached", "cached_reason"])


class Migration(migrations.Migration):
    dependencies = [
        ("collectors", "0001_squashed_0005_event_refers_by_id"),
    ]

    operations = [
        migrations.AddField(
            model_name="hosttestresult",
            name="faster_reason",
            field=models.CharField(blank=True, max_length=300),
        ),
        migrations.AddField(
            model_name="hosttestresult",
            name="faster_than_direct",
            field=models.BooleanField(
                default=False,
                help_text="Not resident, yet more than twice as fast as the series' direct-I/O reads: readahead or the hypervisor's cache answered, not the page cache.",
            ),
        ),
        migrations.AddField(
            model_name="hosttestresult",
            name="resident_fraction",
            field=models.FloatField(
                blank=True,
                help_text="Share of the file's pages in the page cache just before the timed read (mincore, as fincore measures it); null where not measured (fio, which lays out and reads its files in one process).",
                null=True,
            ),
        ),
        migrations.AlterField(
            model_name="hosttestresult",
            name="cached",
            field=models.BooleanField(
                default=False,
                help_text="The read's pages were in the page cache before it (resident_fraction): memory's figure.",
            ),
        ),
        migrations.RunPython(speed_flags_of_cold_series, speed_flags_back),
    ]

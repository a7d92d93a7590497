"""Engine options move from Campaign's fts_* columns into one validated JSON field,
engine_options: {"instance": <FtsInstance id>, "priority": 1-5, "strict_copy": bool} for an FTS
campaign, {} for gfal2. Self-contained: historical models only.

A gfal2 campaign that had an FTS instance set (ignored by its runs) loses it: gfal2 takes no
options. Runs keep their snapshots as they were frozen; the FTS engine still reads the old keys.
Backwards, an FTS campaign gets its columns back from its options.
"""

from django.db import migrations, models


def options_from_columns(apps, schema_editor):
    Campaign = apps.get_model("campaigns", "Campaign")
    for campaign in Campaign.objects.filter(engine="fts").only("pk", "fts_instance", "fts_priority", "fts_strict_copy"):
        options = {"priority": campaign.fts_priority, "strict_copy": campaign.fts_strict_copy}
        if campaign.fts_instance_id:
            options["instance"] = campaign.fts_instance_id
        Campaign.objects.filter(pk=campaign.pk).update(engine_options=options)


def columns_from_options(apps, schema_editor):
    Campaign = apps.get_model("campaigns", "Campaign")
    FtsInstance = apps.get_model("campaigns", "FtsInstance")
    known = set(FtsInstance.objects.values_list("pk", flat=True))
    for campaign in Campaign.objects.filter(engine="fts").only("pk", "engine_options"):
        options = campaign.engine_options or {}
        Campaign.objects.filter(pk=campaign.pk).update(
            fts_instance_id=options.get("instance") if options.get("instance") in known else None,
            fts_priority=options.get("priority", 3),
            fts_strict_copy=bool(options.get("strict_copy", False)),
        )


class Migration(migrations.Migration):
    dependencies = [
        ("campaigns", "0015_campaign_engine_from_registry"),
    ]

    operations = [
        migrations.AddField(
            model_name="campaign",
            name="engine_options",
            field=models.JSONField(
                blank=True,
                default=dict,
                help_text="The engine's own options, checked by its schema: none for gfal2 ({}); for FTS3 "
                '{"instance": <FTS instance id>, "priority": 1-5 (3), "strict_copy": false}.',
            ),
        ),
        migrations.RunPython(options_from_columns, columns_from_options),
        migrations.RemoveField(model_name="campaign", name="fts_instance"),
        migrations.RemoveField(model_name="campaign", name="fts_priority"),
        migrations.RemoveField(model_name="campaign", name="fts_strict_copy"),
    ]

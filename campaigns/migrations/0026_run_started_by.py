"""Who started each run: created_by, which the web and the API already filled but no page
showed, becomes started_by, and started_by_name holds the words for every run (the user's name,
the schedule, the command).

The runs recorded before get what is known of them: their user's name, and for a scheduled run
the number of the schedule its start event names (scheduling wrote {"schedule": pk} into it).
"""

import json
from collections import defaultdict

from django.conf import settings
from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def name_the_starters(apps, schema_editor):
    Run = apps.get_model("campaigns", "Run")
    User = apps.get_model(settings.AUTH_USER_MODEL)
    Event = apps.get_model("collectors", "Event")
    Run.objects.filter(started_by__isnull=False).update(
        started_by_name=Subquery(User.objects.filter(pk=OuterRef("started_by_id")).values("username")[:1])
    )
    by_schedule = defaultdict(list)
    events = Event.objects.filter(kind="schedule", run_id__isnull=False).values_list("run_id", "detail")
    for run_id, detail in events.iterator():
        try:
            schedule = json.loads(detail).get("schedule")
        except (ValueError, TypeError, AttributeError):
            continue  # an event the API logged by hand, not a decision of a schedule
        if isinstance(schedule, int):
            by_schedule[schedule].append(run_id)
    for schedule, run_ids in by_schedule.items():
        Run.objects.filter(pk__in=run_ids, trigger="schedule", started_by_name="").update(
            started_by_name=f"schedule #{schedule}"
        )


class Migration(migrations.Migration):
    dependencies = [
        ("campaigns", "0025_campaign_regression_threshold"),
        ("collectors", "0005_event_refers_by_id"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RenameField(
            model_name="run",
            old_name="created_by",
            new_name="started_by",
        ),
        migrations.AddField(
            model_name="run",
            name="started_by_name",
            field=models.CharField(
                blank=True,
                help_text="Who or what started the run: the user's name, the schedule, or the management command.",
                max_length=150,
            ),
        ),
        migrations.RunPython(name_the_starters, migrations.RunPython.noop),
    ]

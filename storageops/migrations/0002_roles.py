"""Create the viewer, operator and admin groups with their permissions.

The roles are copied here as storageops.roles defined them when this migration was written: a
migration does the same forever, whatever the live code becomes (the post-migrate hook keeps
the groups in step with today's roles).
"""

from django.contrib.auth.management import create_permissions
from django.db import migrations

VIEWER = "viewer"
OPERATOR = "operator"
ADMIN = "admin"
APPS = ("campaigns", "collectors", "storageops", "alerts", "django_celery_beat")
OPERATOR_EXTRA = (
    "campaigns.start_run",
    "campaigns.cancel_run",
    "campaigns.choose_baseline",
    "campaigns.add_readinesscheck",
    "collectors.add_event",
    "collectors.add_hosttestseries",
    "collectors.change_hosttestseries",
)


def sync_groups(apps) -> None:
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    ours = Permission.objects.filter(content_type__app_label__in=APPS)
    view = ours.filter(codename__startswith="view_")
    operator_extra = [
        ours.get(content_type__app_label=label.split(".")[0], codename=label.split(".")[1]) for label in OPERATOR_EXTRA
    ]
    Group.objects.get_or_create(name=VIEWER)[0].permissions.set(view)
    Group.objects.get_or_create(name=OPERATOR)[0].permissions.set([*view, *operator_extra])
    Group.objects.get_or_create(name=ADMIN)[0].permissions.set(ours)


def create_roles(apps, schema_editor):
    # Permissions are normally made after all migrations ran; make them now so that the
    # groups can refer to them on a fresh database.
    for label in (*APPS, "auth", "contenttypes"):
        try:
            app_config = apps.get_app_config(label)
        except LookupError:  # an app with no models yet at this point of the history
            continue
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
    sync_groups(apps)


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("campaigns", "0002_initial"),
        ("collectors", "0001_initial"),
        ("storageops", "0001_initial"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(create_roles, migrations.RunPython.noop)]

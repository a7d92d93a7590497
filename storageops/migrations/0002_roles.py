"""Create the viewer, operator and admin groups with their permissions."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

from storageops.roles import APPS, sync_groups


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

"""Give the roles their permissions on the FTS models (viewer reads, admin configures)."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

from storageops.roles import sync_groups


def grant(apps, schema_editor):
    app_config = apps.get_app_config("campaigns")
    app_config.models_module = True
    create_permissions(app_config, apps=apps, verbosity=0)
    sync_groups(apps)


class Migration(migrations.Migration):
    dependencies = [
        ("campaigns", "0004_fts_instance"),
        ("storageops", "0001_roles"),
    ]

    operations = [migrations.RunPython(grant, migrations.RunPython.noop)]

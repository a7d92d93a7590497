"""The FTS engine's app takes over FtsInstance and FtsLinkLimit from campaigns (0029): their
state is created here over the tables they already have (db_table keeps the campaigns_ names,
so no row moves and nothing is locked), then what names them by app label follows them: their
content types, so the permissions the role groups and users hold stay theirs, and the change
log's records, so an instance's history stays on it."""

import django.core.validators
import django.db.models.deletion
from django.db import migrations, models

import storageops.sealed
import storageops.validators

MODELS = ("ftsinstance", "ftslinklimit")


def _relabel(apps, old: str, new: str) -> None:
    ContentType = apps.get_model("contenttypes", "ContentType")
    ChangeRecord = apps.get_model("storageops", "ChangeRecord")
    for model in MODELS:
        # A database where the new label's type exists already (made by a post-migrate of its
        # own) keeps both: relabelling would break the unique (app_label, model).
        if not ContentType.objects.filter(app_label=new, model=model).exists():
            ContentType.objects.filter(app_label=old, model=model).update(app_label=new)
        ChangeRecord.objects.filter(object_type=f"{old}.{model}").update(object_type=f"{new}.{model}")


def forwards(apps, schema_editor) -> None:
    _relabel(apps, "campaigns", "fts")


def backwards(apps, schema_editor) -> None:
    _relabel(apps, "fts", "campaigns")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("campaigns", "0029_fts_models_move_to_the_fts_app"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("storageops", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="FtsInstance",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("created", models.DateTimeField(auto_now_add=True)),
                        ("last_updated", models.DateTimeField(auto_now=True)),
                        ("name", models.CharField(max_length=100, unique=True)),
                        (
                            "url",
                            models.CharField(
                                help_text="The FTS3 REST server, e.g. https://fts3-pilot.cern.ch:8446",
                                max_length=300,
                                validators=[storageops.validators.validate_http_url],
                                verbose_name="REST URL",
                            ),
                        ),
                        (
                            "x509_cert",
                            models.CharField(
                                blank=True,
                                help_text="Path on the worker, e.g. /tmp/x509up_u1000.",
                                max_length=500,
                                validators=[storageops.validators.validate_absolute_path],
                                verbose_name="X.509 certificate or proxy",
                            ),
                        ),
                        (
                            "x509_key",
                            models.CharField(
                                blank=True,
                                help_text="Empty for a proxy file.",
                                max_length=500,
                                validators=[storageops.validators.validate_absolute_path],
                                verbose_name="X.509 key",
                            ),
                        ),
                        (
                            "bearer_token",
                            storageops.sealed.SealedTextField(
                                blank=True, help_text="OIDC access token sent as Bearer (write-only)."
                            ),
                        ),
                        (
                            "ca_path",
                            models.CharField(
                                blank=True,
                                help_text="CA bundle file or hashed CA directory to verify the server; empty: the system's.",
                                max_length=500,
                                validators=[storageops.validators.validate_absolute_path],
                                verbose_name="CA path",
                            ),
                        ),
                        (
                            "verify_tls",
                            models.BooleanField(default=True, verbose_name="verify the server's certificate"),
                        ),
                        (
                            "files_per_job",
                            models.PositiveIntegerField(
                                default=100,
                                help_text="Files in each bulk job StorageOps submits.",
                                validators=[
                                    django.core.validators.MinValueValidator(1),
                                    django.core.validators.MaxValueValidator(1000),
                                ],
                            ),
                        ),
                        (
                            "manage_link_limits",
                            models.BooleanField(
                                default=False,
                                help_text="Set min_active = max_active on the run's links for each concurrency step and restore them after (needs FTS's config role).",
                            ),
                        ),
                        (
                            "poll_seconds",
                            models.FloatField(
                                default=2.0,
                                validators=[
                                    django.core.validators.MinValueValidator(0.2),
                                    django.core.validators.MaxValueValidator(300),
                                ],
                                verbose_name="poll interval (s)",
                            ),
                        ),
                        ("notes", models.TextField(blank=True)),
                    ],
                    options={
                        "verbose_name": "FTS instance",
                        "db_table": "campaigns_ftsinstance",
                        "ordering": ["name"],
                    },
                ),
                migrations.CreateModel(
                    name="FtsLinkLimit",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("symbolicname", models.CharField(max_length=150)),
                        ("source_se", models.CharField(max_length=300)),
                        ("dest_se", models.CharField(max_length=300)),
                        ("previous", models.JSONField(blank=True, null=True)),
                        ("applied", models.JSONField(default=dict, help_text="The last values StorageOps set.")),
                        ("changed_at", models.DateTimeField()),
                        ("restored_at", models.DateTimeField(blank=True, null=True)),
                        ("restore_error", models.TextField(blank=True)),
                        (
                            "run",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="fts_link_limits",
                                to="campaigns.run",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "campaigns_ftslinklimit",
                        "ordering": ["run", "symbolicname"],
                        "constraints": [
                            models.UniqueConstraint(fields=("run", "symbolicname"), name="ftslinklimit_unique")
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(forwards, backwards),
    ]

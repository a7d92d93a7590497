"""collectors' schema from scratch (0001..0005 squashed): Event refers to backend, endpoint
and run by id, so collectors no longer depends on campaigns."""

import django.core.validators
import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models

import collectors.models
import storageops.validators


class Migration(migrations.Migration):
    replaces = [
        ("collectors", "0001_initial"),
        ("collectors", "0002_honest_runs"),
        ("collectors", "0003_host_test_series"),
        ("collectors", "0004_host_client_role_and_weight"),
        ("collectors", "0005_event_refers_by_id"),
    ]

    # No dependency on campaigns: events refer to its backends, endpoints and runs by id. An
    # existing database (collectors 0001..0004 applied) runs the replaced migrations, 0005 last.
    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="Host",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("created", models.DateTimeField(auto_now_add=True)),
                ("last_updated", models.DateTimeField(auto_now=True)),
                (
                    "name",
                    models.CharField(
                        max_length=63,
                        unique=True,
                        validators=[
                            django.core.validators.RegexValidator(
                                "^[a-z0-9][a-z0-9.\\-_]{0,62}$",
                                "Use lower-case letters, digits, dots, dashes and underscores (it names the collector's queue).",
                            )
                        ],
                    ),
                ),
                ("address", models.CharField(blank=True, help_text="FQDN or IP address.", max_length=255)),
                (
                    "role",
                    models.CharField(
                        choices=[
                            ("door", "Door / gateway"),
                            ("pool", "Pool / data server"),
                            ("oss", "Lustre OSS"),
                            ("mds", "Metadata server"),
                            ("client", "Client (runs copies for campaigns)"),
                            ("other", "Other"),
                        ],
                        default="door",
                        max_length=10,
                    ),
                ),
                (
                    "node_exporter_url",
                    models.CharField(
                        blank=True,
                        help_text="e.g. http://door1.example.org:9100/metrics",
                        max_length=300,
                        validators=[storageops.validators.validate_http_url],
                    ),
                ),
                (
                    "link_speed_bps",
                    models.PositiveBigIntegerField(
                        blank=True,
                        help_text="For network saturation, e.g. 25000000000.",
                        null=True,
                        verbose_name="link speed (bit/s)",
                    ),
                ),
                (
                    "sample_interval",
                    models.PositiveSmallIntegerField(
                        default=5,
                        validators=[
                            django.core.validators.MinValueValidator(1),
                            django.core.validators.MaxValueValidator(3600),
                        ],
                        verbose_name="sample interval (s)",
                    ),
                ),
                (
                    "watched_files",
                    models.JSONField(blank=True, default=list, validators=[collectors.models.validate_path_list]),
                ),
                (
                    "watched_services",
                    models.JSONField(blank=True, default=list, validators=[collectors.models.validate_services]),
                ),
                (
                    "log_files",
                    models.JSONField(blank=True, default=list, validators=[collectors.models.validate_log_files]),
                ),
                ("collector_version", models.CharField(blank=True, max_length=50)),
                ("last_seen", models.DateTimeField(blank=True, null=True)),
                ("notes", models.TextField(blank=True)),
                (
                    "client_weight",
                    models.PositiveSmallIntegerField(
                        default=1,
                        help_text="A client's share of each step's concurrency, relative to the other clients of a pool.",
                        validators=[
                            django.core.validators.MinValueValidator(1),
                            django.core.validators.MaxValueValidator(100),
                        ],
                    ),
                ),
            ],
            options={
                "ordering": ["name"],
            },
        ),
        migrations.CreateModel(
            name="MetricRollup",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("metric", models.CharField(max_length=64)),
                ("label", models.CharField(blank=True, max_length=64)),
                ("time", models.DateTimeField(help_text="Start of the bucket.")),
                ("seconds", models.PositiveIntegerField(help_text="Length of the bucket.")),
                ("count", models.PositiveIntegerField()),
                ("mean", models.FloatField()),
                ("minimum", models.FloatField()),
                ("maximum", models.FloatField()),
                (
                    "host",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="rollups", to="collectors.host"
                    ),
                ),
            ],
            options={
                "indexes": [models.Index(fields=["host", "metric", "time"], name="rollup_host_metric_time_idx")],
            },
        ),
        migrations.CreateModel(
            name="MetricSample",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("metric", models.CharField(max_length=64)),
                ("label", models.CharField(blank=True, max_length=64)),
                ("time", models.DateTimeField()),
                ("value", models.FloatField()),
                (
                    "host",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="samples", to="collectors.host"
                    ),
                ),
            ],
            options={
                "indexes": [models.Index(fields=["host", "metric", "time"], name="sample_host_metric_time_idx")],
            },
        ),
        migrations.CreateModel(
            name="HostTestSeries",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("tool", models.CharField(max_length=10)),
                (
                    "params",
                    models.JSONField(help_text="The validated parameters (collectors.hosttest_series.SeriesParams)."),
                ),
                ("repeats", models.PositiveIntegerField()),
                (
                    "byte_budget",
                    models.PositiveBigIntegerField(help_text="Bytes the series may write; it stops there."),
                ),
                ("bytes_written", models.PositiveBigIntegerField(default=0)),
                (
                    "state",
                    models.CharField(
                        choices=[
                            ("queued", "Queued"),
                            ("running", "Running"),
                            ("succeeded", "Succeeded"),
                            ("failed", "Failed"),
                            ("cancelled", "Cancelled"),
                        ],
                        default="queued",
                        max_length=10,
                    ),
                ),
                ("cancel_requested", models.BooleanField(default=False)),
                ("error", models.TextField(blank=True)),
                ("created", models.DateTimeField(auto_now_add=True)),
                ("started_at", models.DateTimeField(blank=True, null=True)),
                ("finished_at", models.DateTimeField(blank=True, null=True)),
                (
                    "created_by",
                    models.ForeignKey(
                        blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to=settings.AUTH_USER_MODEL
                    ),
                ),
                (
                    "host",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="test_series", to="collectors.host"
                    ),
                ),
            ],
            options={
                "verbose_name_plural": "host test series",
                "ordering": ["-created"],
            },
        ),
        migrations.CreateModel(
            name="HostTestResult",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("index", models.PositiveIntegerField()),
                ("time", models.DateTimeField()),
                ("seconds", models.FloatField(help_text="The repeat's whole duration.")),
                ("write_bps", models.FloatField(blank=True, null=True)),
                ("read_bps", models.FloatField(blank=True, null=True)),
                (
                    "direct_read_bps",
                    models.FloatField(blank=True, help_text="The O_DIRECT reference read, if asked.", null=True),
                ),
                ("iops", models.FloatField(blank=True, null=True)),
                ("lat_p50_ms", models.FloatField(blank=True, null=True)),
                ("lat_p99_ms", models.FloatField(blank=True, null=True)),
                ("cached", models.BooleanField(default=False)),
                ("cached_reason", models.CharField(blank=True, max_length=300)),
                (
                    "series",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="results",
                        to="collectors.hosttestseries",
                    ),
                ),
            ],
            options={
                "ordering": ["series", "index"],
                "constraints": [
                    models.UniqueConstraint(fields=("series", "index"), name="hosttestresult_series_index")
                ],
            },
        ),
        migrations.CreateModel(
            name="Event",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("time", models.DateTimeField(db_index=True, default=django.utils.timezone.now)),
                (
                    "kind",
                    models.CharField(
                        choices=[
                            ("config_change", "Config change"),
                            ("service_restart", "Service restart"),
                            ("reboot", "Reboot"),
                            ("log_burst", "Log burst"),
                            ("note", "Note"),
                            ("deploy", "Deploy"),
                            ("run_start", "Run start"),
                            ("run_end", "Run end"),
                            ("fts_config", "FTS config change"),
                            ("schedule", "Scheduler decision"),
                            ("run_incident", "Run incident"),
                        ],
                        max_length=20,
                    ),
                ),
                (
                    "source",
                    models.CharField(
                        choices=[
                            ("collector", "Collector"),
                            ("operator", "Operator"),
                            ("api", "API"),
                            ("storageops", "StorageOps"),
                        ],
                        default="operator",
                        max_length=12,
                    ),
                ),
                (
                    "who",
                    models.CharField(blank=True, help_text="Who, kept even if the user is deleted.", max_length=150),
                ),
                ("summary", models.CharField(max_length=300)),
                ("detail", models.TextField(blank=True)),
                ("created", models.DateTimeField(auto_now_add=True)),
                ("backend_id", models.BigIntegerField(blank=True, db_index=True, null=True)),
                ("endpoint_id", models.BigIntegerField(blank=True, db_index=True, null=True)),
                ("run_id", models.BigIntegerField(blank=True, db_index=True, null=True)),
                (
                    "user",
                    models.ForeignKey(
                        blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to=settings.AUTH_USER_MODEL
                    ),
                ),
                (
                    "host",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="events",
                        to="collectors.host",
                    ),
                ),
            ],
            options={
                "ordering": ["-time"],
                "indexes": [
                    models.Index(fields=["host", "time"], name="event_host_time_idx"),
                    models.Index(fields=["kind", "time"], name="event_kind_time_idx"),
                ],
            },
        ),
    ]

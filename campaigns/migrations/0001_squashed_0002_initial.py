"""campaigns' schema from scratch, 0001 and 0002 squashed: they were split only because
collectors' Event referred to campaigns' models while Endpoint refers to collectors' Host."""

import django.core.validators
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

import campaigns.models.definitions
import campaigns.models.schedules
import storageops.validators


class Migration(migrations.Migration):
    replaces = [("campaigns", "0001_initial"), ("campaigns", "0002_initial")]

    # collectors 0001_initial is the one that creates Host: on a fresh database Django points
    # this at collectors' squashed 0001_squashed_0005; on one with collectors 0001..0004 applied
    # it stays 0001_initial, so a database already at today's schema migrates on consistently.
    dependencies = [
        ("collectors", "0001_initial"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="Backend",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("created", models.DateTimeField(auto_now_add=True)),
                ("last_updated", models.DateTimeField(auto_now=True)),
                (
                    "name",
                    models.CharField(
                        max_length=100,
                        unique=True,
                        validators=[
                            django.core.validators.RegexValidator(
                                "^[A-Za-z0-9][A-Za-z0-9 ._\\-]*$",
                                "Use letters, digits, spaces, dots, dashes and underscores, starting with a letter or digit.",
                            )
                        ],
                    ),
                ),
                (
                    "access_layer",
                    models.CharField(
                        choices=[
                            ("xrootd", "XRootD"),
                            ("dcache", "dCache"),
                            ("eos", "EOS"),
                            ("storm", "StoRM"),
                            ("echo", "XRootD/Ceph (Echo)"),
                            ("other", "Other"),
                        ],
                        help_text="The protocol/door software.",
                        max_length=20,
                    ),
                ),
                ("access_version", models.CharField(blank=True, help_text="e.g. 5.6.9", max_length=50)),
                (
                    "unified_layer",
                    models.CharField(
                        blank=True,
                        help_text="Namespace/filesystem layer, e.g. Lustre, CephFS, dCache pools.",
                        max_length=100,
                    ),
                ),
                ("unified_version", models.CharField(blank=True, max_length=50)),
                (
                    "storage_layer",
                    models.CharField(
                        blank=True, help_text="Backend storage, e.g. ZFS 10x10, MD RAID 14x7, Ceph RBD.", max_length=100
                    ),
                ),
                ("storage_version", models.CharField(blank=True, max_length=50)),
                ("notes", models.TextField(blank=True)),
            ],
            options={
                "ordering": ["name"],
            },
        ),
        migrations.CreateModel(
            name="Campaign",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("created", models.DateTimeField(auto_now_add=True)),
                ("last_updated", models.DateTimeField(auto_now=True)),
                (
                    "name",
                    models.CharField(
                        max_length=100,
                        unique=True,
                        validators=[
                            django.core.validators.RegexValidator(
                                "^[A-Za-z0-9][A-Za-z0-9 ._\\-]*$",
                                "Use letters, digits, spaces, dots, dashes and underscores, starting with a letter or digit.",
                            )
                        ],
                    ),
                ),
                ("description", models.TextField(blank=True)),
                (
                    "kind",
                    models.CharField(
                        choices=[("transfer", "Transfers"), ("checksum_load", "Checksum load")],
                        default="transfer",
                        max_length=20,
                    ),
                ),
                (
                    "engine",
                    models.CharField(choices=[("gfal2", "gfal2"), ("fts", "FTS3")], default="gfal2", max_length=10),
                ),
                (
                    "source_path",
                    models.CharField(
                        default="storageops/source",
                        help_text="Where the source files live, relative to each source endpoint.",
                        max_length=300,
                        validators=[storageops.validators.validate_relative_path],
                    ),
                ),
                (
                    "destination_path",
                    models.CharField(
                        default="storageops/runs",
                        help_text="Each run writes below <destination>/<this path>/run-<id>/.",
                        max_length=300,
                        validators=[storageops.validators.validate_relative_path],
                    ),
                ),
                (
                    "create_sources",
                    models.BooleanField(
                        default=False, help_text="Upload generated data to the sources before the run starts."
                    ),
                ),
                (
                    "file_count",
                    models.PositiveIntegerField(default=100, validators=[django.core.validators.MinValueValidator(1)]),
                ),
                (
                    "file_size",
                    models.PositiveBigIntegerField(
                        default=100000000,
                        validators=[django.core.validators.MinValueValidator(1)],
                        verbose_name="file size (bytes)",
                    ),
                ),
                (
                    "file_mix",
                    models.JSONField(
                        blank=True,
                        default=list,
                        help_text='Overrides count × size, e.g. [{"count": 9000, "size": 9e9}, {"count": 6000, "size": 4e9}].',
                        validators=[campaigns.models.definitions.validate_file_mix],
                    ),
                ),
                (
                    "source_file_count",
                    models.PositiveIntegerField(
                        blank=True,
                        help_text="Distinct source files reused in turn; empty means one source file per transfer.",
                        null=True,
                        validators=[django.core.validators.MinValueValidator(1)],
                    ),
                ),
                (
                    "direction",
                    models.CharField(
                        choices=[
                            ("forward", "Sources → destinations"),
                            ("reverse", "Destinations → sources"),
                            ("both", "Both ways, alternating"),
                        ],
                        default="forward",
                        max_length=10,
                    ),
                ),
                (
                    "tpc_mode",
                    models.CharField(
                        choices=[
                            ("auto", "Plugin default"),
                            ("pull", "Third-party pull"),
                            ("push", "Third-party push"),
                            ("streamed", "Streamed through the client"),
                        ],
                        default="auto",
                        max_length=10,
                        verbose_name="copy mode",
                    ),
                ),
                (
                    "checksum_mode",
                    models.CharField(
                        choices=[
                            ("none", "None"),
                            ("source", "Source only"),
                            ("target", "Target only"),
                            ("both", "Source and target"),
                        ],
                        default="both",
                        max_length=10,
                    ),
                ),
                (
                    "checksum_algorithm",
                    models.CharField(
                        choices=[("adler32", "adler32"), ("crc32", "crc32"), ("md5", "md5")],
                        default="adler32",
                        max_length=10,
                    ),
                ),
                (
                    "streams",
                    models.PositiveSmallIntegerField(
                        default=1,
                        help_text="Parallel streams per copy.",
                        validators=[
                            django.core.validators.MinValueValidator(1),
                            django.core.validators.MaxValueValidator(64),
                        ],
                    ),
                ),
                (
                    "tcp_buffer_size",
                    models.PositiveIntegerField(
                        default=0, help_text="0 leaves the plugin's default.", verbose_name="TCP buffer size (bytes)"
                    ),
                ),
                (
                    "timeout",
                    models.PositiveIntegerField(
                        default=3600,
                        validators=[
                            django.core.validators.MinValueValidator(1),
                            django.core.validators.MaxValueValidator(604800),
                        ],
                        verbose_name="timeout (s)",
                    ),
                ),
                ("overwrite", models.BooleanField(default=True)),
                ("create_parent", models.BooleanField(default=True)),
                (
                    "retries",
                    models.PositiveSmallIntegerField(
                        default=0, validators=[django.core.validators.MaxValueValidator(10)]
                    ),
                ),
                (
                    "concurrency_steps",
                    models.JSONField(
                        default=campaigns.models.definitions.default_concurrency_steps,
                        help_text="One value for a fixed concurrency, several for a sweep, e.g. [1, 2, 4, 8].",
                        validators=[campaigns.models.definitions.validate_concurrency_steps],
                    ),
                ),
                (
                    "step_seconds",
                    models.PositiveIntegerField(
                        blank=True,
                        help_text="Each step lasts this long…",
                        null=True,
                        validators=[django.core.validators.MinValueValidator(1)],
                    ),
                ),
                (
                    "step_files",
                    models.PositiveIntegerField(
                        blank=True,
                        help_text="…or until this many files finished.",
                        null=True,
                        validators=[django.core.validators.MinValueValidator(1)],
                    ),
                ),
                (
                    "max_bytes",
                    models.PositiveBigIntegerField(
                        blank=True,
                        help_text="Stop cleanly once this many bytes were moved.",
                        null=True,
                        validators=[django.core.validators.MinValueValidator(1)],
                        verbose_name="byte budget",
                    ),
                ),
                (
                    "max_duration",
                    models.PositiveIntegerField(
                        blank=True,
                        null=True,
                        validators=[django.core.validators.MinValueValidator(1)],
                        verbose_name="duration budget (s)",
                    ),
                ),
                (
                    "target_rate_bps",
                    models.PositiveBigIntegerField(
                        blank=True,
                        help_text="The rate the capacity projection sizes doors for, e.g. 40000000000 for a 40 Gb/s site link; empty uses STORAGEOPS_TARGET_RATE_BPS.",
                        null=True,
                        validators=[django.core.validators.MinValueValidator(1)],
                        verbose_name="target rate (bit/s)",
                    ),
                ),
                (
                    "cancel_grace",
                    models.PositiveIntegerField(
                        default=10,
                        help_text="On cancel, in-flight copies may finish within this time before they are aborted.",
                        validators=[django.core.validators.MaxValueValidator(3600)],
                        verbose_name="cancel grace (s)",
                    ),
                ),
                (
                    "max_bytes_per_day",
                    models.PositiveBigIntegerField(
                        blank=True,
                        help_text="Bytes all runs of this campaign may move per day (site time zone); a run stops at what is left.",
                        null=True,
                        validators=[django.core.validators.MinValueValidator(1)],
                        verbose_name="daily byte budget",
                    ),
                ),
                (
                    "max_bytes_per_week",
                    models.PositiveBigIntegerField(
                        blank=True,
                        help_text="The same per ISO week (Monday to Sunday).",
                        null=True,
                        validators=[django.core.validators.MinValueValidator(1)],
                        verbose_name="weekly byte budget",
                    ),
                ),
                (
                    "allow_overlap",
                    models.BooleanField(
                        default=False,
                        help_text="Let a scheduled run start while another run writes to the same destination endpoint or backend.",
                    ),
                ),
                (
                    "cleanup",
                    models.CharField(
                        choices=[("keep", "Keep the files"), ("delete", "Delete the run's files at its end")],
                        default="keep",
                        help_text="Delete the files a run wrote (below its run-<id>/ folder) when it ends, or keep them.",
                        max_length=10,
                        verbose_name="clean-up",
                    ),
                ),
                (
                    "fts_priority",
                    models.PositiveSmallIntegerField(
                        default=3,
                        validators=[
                            django.core.validators.MinValueValidator(1),
                            django.core.validators.MaxValueValidator(5),
                        ],
                        verbose_name="FTS priority",
                    ),
                ),
                (
                    "fts_strict_copy",
                    models.BooleanField(
                        default=False,
                        help_text="Copy only: no checksum, size or parent-directory checks.",
                        verbose_name="FTS strict copy",
                    ),
                ),
            ],
            options={
                "ordering": ["name"],
            },
        ),
        migrations.CreateModel(
            name="FtsInstance",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
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
                        validators=[campaigns.models.definitions.validate_absolute_path],
                        verbose_name="X.509 certificate or proxy",
                    ),
                ),
                (
                    "x509_key",
                    models.CharField(
                        blank=True,
                        help_text="Empty for a proxy file.",
                        max_length=500,
                        validators=[campaigns.models.definitions.validate_absolute_path],
                        verbose_name="X.509 key",
                    ),
                ),
                (
                    "bearer_token",
                    models.TextField(blank=True, help_text="OIDC access token sent as Bearer (write-only)."),
                ),
                (
                    "ca_path",
                    models.CharField(
                        blank=True,
                        help_text="CA bundle file or hashed CA directory to verify the server; empty: the system's.",
                        max_length=500,
                        validators=[campaigns.models.definitions.validate_absolute_path],
                        verbose_name="CA path",
                    ),
                ),
                ("verify_tls", models.BooleanField(default=True, verbose_name="verify the server's certificate")),
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
                "ordering": ["name"],
            },
        ),
        migrations.CreateModel(
            name="Run",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "state",
                    models.CharField(
                        choices=[
                            ("pending", "Pending"),
                            ("running", "Running"),
                            ("cancelling", "Cancelling"),
                            ("succeeded", "Succeeded"),
                            ("failed", "Failed"),
                            ("cancelled", "Cancelled"),
                        ],
                        db_index=True,
                        default="pending",
                        max_length=12,
                    ),
                ),
                (
                    "trigger",
                    models.CharField(
                        choices=[
                            ("web", "Web"),
                            ("api", "API"),
                            ("command", "Command"),
                            ("schedule", "Schedule"),
                            ("demo", "Demo site"),
                        ],
                        default="web",
                        max_length=10,
                    ),
                ),
                ("created", models.DateTimeField(auto_now_add=True)),
                ("started_at", models.DateTimeField(blank=True, null=True)),
                ("finished_at", models.DateTimeField(blank=True, null=True)),
                ("snapshot", models.JSONField(blank=True, default=dict)),
                ("versions", models.JSONField(blank=True, default=dict)),
                ("planned_files", models.PositiveIntegerField(default=0)),
                ("planned_bytes", models.PositiveBigIntegerField(default=0)),
                ("files_done", models.PositiveIntegerField(default=0)),
                ("files_failed", models.PositiveIntegerField(default=0)),
                (
                    "files_skipped",
                    models.PositiveIntegerField(default=0, help_text="Never tried (budget, stop) or cancelled."),
                ),
                ("bytes_done", models.PositiveBigIntegerField(default=0)),
                ("current_step", models.PositiveSmallIntegerField(blank=True, null=True)),
                ("current_concurrency", models.PositiveIntegerField(blank=True, null=True)),
                ("active_transfers", models.PositiveIntegerField(default=0)),
                ("throughput_bps", models.FloatField(blank=True, help_text="Bytes/s over the last 10 s.", null=True)),
                ("eta_seconds", models.FloatField(blank=True, null=True)),
                ("progress_at", models.DateTimeField(blank=True, null=True)),
                ("stop_reason", models.CharField(blank=True, max_length=200)),
                ("error", models.TextField(blank=True)),
                ("cancel_requested_at", models.DateTimeField(blank=True, null=True)),
                ("executor", models.CharField(blank=True, max_length=200)),
                ("heartbeat_at", models.DateTimeField(blank=True, null=True)),
                ("summary", models.JSONField(blank=True, default=dict)),
                (
                    "disturbed",
                    models.BooleanField(
                        default=False,
                        help_text="A restart or config change of its hosts, backends or endpoints fell in its window.",
                    ),
                ),
            ],
            options={
                "ordering": ["-created"],
                "permissions": [("start_run", "Can start runs"), ("cancel_run", "Can cancel runs")],
            },
        ),
        migrations.CreateModel(
            name="CampaignSchedule",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("created", models.DateTimeField(auto_now_add=True)),
                ("last_updated", models.DateTimeField(auto_now=True)),
                ("enabled", models.BooleanField(default=True)),
                (
                    "kind",
                    models.CharField(
                        choices=[("cron", "Cron expression"), ("interval", "Every N minutes")],
                        default="cron",
                        max_length=10,
                    ),
                ),
                (
                    "cron",
                    models.CharField(
                        blank=True,
                        help_text="e.g. '0 2 * * *' for 02:00 every night.",
                        max_length=100,
                        validators=[campaigns.models.schedules.validate_cron],
                    ),
                ),
                (
                    "interval_minutes",
                    models.PositiveIntegerField(
                        blank=True,
                        null=True,
                        validators=[
                            django.core.validators.MinValueValidator(1),
                            django.core.validators.MaxValueValidator(527040),
                        ],
                    ),
                ),
                (
                    "time_zone",
                    models.CharField(
                        default="UTC",
                        help_text="The site's time zone.",
                        max_length=64,
                        validators=[campaigns.models.schedules.validate_time_zone],
                    ),
                ),
                (
                    "window_days",
                    models.CharField(
                        blank=True,
                        help_text="e.g. mon-fri; blank means every day.",
                        max_length=40,
                        validators=[campaigns.models.schedules.validate_weekdays],
                        verbose_name="allowed days",
                    ),
                ),
                (
                    "window_start",
                    models.TimeField(
                        blank=True, help_text="e.g. 09:00; blank: any time.", null=True, verbose_name="allowed from"
                    ),
                ),
                (
                    "window_end",
                    models.TimeField(
                        blank=True, help_text="e.g. 16:00 (may wrap midnight).", null=True, verbose_name="allowed until"
                    ),
                ),
                (
                    "max_slip_minutes",
                    models.PositiveIntegerField(
                        default=10,
                        help_text="Start at most this late after the due time, else skip (and say why).",
                        validators=[django.core.validators.MaxValueValidator(10080)],
                        verbose_name="max slip (minutes)",
                    ),
                ),
                (
                    "max_runs",
                    models.PositiveIntegerField(
                        blank=True,
                        help_text="Stop after this many scheduled runs.",
                        null=True,
                        validators=[django.core.validators.MinValueValidator(1)],
                    ),
                ),
                ("runs_started", models.PositiveIntegerField(default=0, editable=False)),
                ("last_due_at", models.DateTimeField(blank=True, editable=False, null=True)),
                ("last_decision", models.CharField(blank=True, editable=False, max_length=300)),
                (
                    "campaign",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE, related_name="schedule", to="campaigns.campaign"
                    ),
                ),
                (
                    "periodic_task",
                    models.OneToOneField(
                        blank=True,
                        editable=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        to="django_celery_beat.periodictask",
                    ),
                ),
            ],
            options={
                "ordering": ["campaign__name"],
            },
        ),
        migrations.CreateModel(
            name="Endpoint",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("created", models.DateTimeField(auto_now_add=True)),
                ("last_updated", models.DateTimeField(auto_now=True)),
                (
                    "name",
                    models.CharField(
                        max_length=100,
                        unique=True,
                        validators=[
                            django.core.validators.RegexValidator(
                                "^[A-Za-z0-9][A-Za-z0-9 ._\\-]*$",
                                "Use letters, digits, spaces, dots, dashes and underscores, starting with a letter or digit.",
                            )
                        ],
                    ),
                ),
                (
                    "url",
                    models.CharField(
                        help_text="e.g. root://door1.example.org:1094//atlas/test/ or davs://door2:2880/pnfs/test/",
                        max_length=500,
                        validators=[storageops.validators.validate_transfer_url],
                        verbose_name="URL prefix",
                    ),
                ),
                (
                    "bearer_token",
                    models.TextField(blank=True, help_text="Bearer token sent to this endpoint (write-only)."),
                ),
                (
                    "x509_proxy",
                    models.CharField(
                        blank=True, max_length=500, validators=[campaigns.models.definitions.validate_absolute_path]
                    ),
                ),
                (
                    "ca_dir",
                    models.CharField(
                        blank=True,
                        help_text="Hashed CA directory (X509_CERT_DIR) for https/davs/roots endpoints.",
                        max_length=500,
                        validators=[campaigns.models.definitions.validate_absolute_path],
                        verbose_name="CA directory",
                    ),
                ),
                ("notes", models.TextField(blank=True)),
                (
                    "backend",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT, related_name="endpoints", to="campaigns.backend"
                    ),
                ),
                (
                    "hosts",
                    models.ManyToManyField(
                        blank=True,
                        help_text="The doors serving this endpoint.",
                        related_name="endpoints",
                        to="collectors.host",
                    ),
                ),
            ],
            options={
                "ordering": ["name"],
            },
        ),
        migrations.AddField(
            model_name="campaign",
            name="destinations",
            field=models.ManyToManyField(blank=True, related_name="destination_of_campaigns", to="campaigns.endpoint"),
        ),
        migrations.AddField(
            model_name="campaign",
            name="sources",
            field=models.ManyToManyField(related_name="source_of_campaigns", to="campaigns.endpoint"),
        ),
        migrations.AddField(
            model_name="campaign",
            name="fts_instance",
            field=models.ForeignKey(
                blank=True,
                help_text="The FTS3 server that runs this campaign's transfers (engine FTS3).",
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="campaigns",
                to="campaigns.ftsinstance",
            ),
        ),
        migrations.CreateModel(
            name="RunChart",
            fields=[
                (
                    "run",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="chart",
                        serialize=False,
                        to="campaigns.run",
                    ),
                ),
                ("computed_at", models.DateTimeField(auto_now=True)),
                ("data", models.JSONField(default=dict)),
            ],
        ),
        migrations.AddField(
            model_name="run",
            name="campaign",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT, related_name="runs", to="campaigns.campaign"
            ),
        ),
        migrations.AddField(
            model_name="run",
            name="created_by",
            field=models.ForeignKey(
                blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to=settings.AUTH_USER_MODEL
            ),
        ),
        migrations.CreateModel(
            name="FtsLinkLimit",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
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
                        on_delete=django.db.models.deletion.CASCADE, related_name="fts_link_limits", to="campaigns.run"
                    ),
                ),
            ],
            options={
                "ordering": ["run", "symbolicname"],
            },
        ),
        migrations.CreateModel(
            name="RunStep",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("index", models.PositiveSmallIntegerField()),
                ("concurrency", models.PositiveIntegerField()),
                ("started_at", models.DateTimeField()),
                ("ended_at", models.DateTimeField(blank=True, null=True)),
                (
                    "run",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="steps", to="campaigns.run"
                    ),
                ),
            ],
            options={
                "ordering": ["run", "index"],
            },
        ),
        migrations.CreateModel(
            name="Transfer",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("index", models.PositiveIntegerField()),
                ("step", models.PositiveSmallIntegerField(blank=True, null=True)),
                ("source", models.TextField()),
                ("destination", models.TextField()),
                ("size", models.PositiveBigIntegerField(help_text="Planned bytes.")),
                (
                    "state",
                    models.CharField(
                        choices=[
                            ("queued", "Queued"),
                            ("active", "Active"),
                            ("succeeded", "Succeeded"),
                            ("failed", "Failed"),
                            ("cancelled", "Cancelled"),
                            ("skipped", "Skipped (budget or stop)"),
                        ],
                        default="queued",
                        max_length=10,
                    ),
                ),
                (
                    "attempt",
                    models.PositiveSmallIntegerField(
                        default=0,
                        help_text="Hand-overs to a copy thread. After a worker crash, the transfers it had handed over (copying, or queued in its memory) are retried and count one attempt more.",
                    ),
                ),
                ("executor", models.CharField(blank=True, max_length=200)),
                ("started_at", models.DateTimeField(blank=True, null=True)),
                ("finished_at", models.DateTimeField(blank=True, null=True)),
                ("duration", models.FloatField(blank=True, null=True, verbose_name="duration (s)")),
                ("bytes_transferred", models.PositiveBigIntegerField(blank=True, null=True)),
                ("throughput_bps", models.FloatField(blank=True, null=True)),
                (
                    "error_category",
                    models.CharField(
                        blank=True,
                        choices=[
                            ("", "None"),
                            ("checksum_mismatch", "Checksum mismatch"),
                            ("checksum_timeout", "Checksum timeout"),
                            ("transfer_timeout", "Transfer timeout"),
                            ("http_5xx", "HTTP 5xx"),
                            ("tpc_failure", "TPC failure"),
                            ("connection_refused", "Connection refused"),
                            ("no_space", "No space"),
                            ("permission_denied", "Permission denied"),
                            ("not_found", "Not found"),
                            ("file_exists", "File exists"),
                            ("cancelled", "Cancelled"),
                            ("other", "Other"),
                        ],
                        max_length=20,
                    ),
                ),
                ("error_code", models.IntegerField(blank=True, null=True)),
                ("error_message", models.TextField(blank=True)),
                (
                    "copy_mode",
                    models.CharField(blank=True, help_text="The mode the engine reports it used.", max_length=20),
                ),
                ("source_checksum", models.CharField(blank=True, max_length=128)),
                ("destination_checksum", models.CharField(blank=True, max_length=128)),
                (
                    "fts_job_id",
                    models.CharField(blank=True, db_default="", default="", max_length=64, verbose_name="FTS job id"),
                ),
                ("fts_file_id", models.BigIntegerField(blank=True, null=True, verbose_name="FTS file id")),
                (
                    "transfer_host",
                    models.CharField(
                        blank=True,
                        db_default="",
                        default="",
                        help_text="The FTS node that ran the copy.",
                        max_length=255,
                    ),
                ),
                (
                    "destination_endpoint",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="campaigns.endpoint",
                    ),
                ),
                (
                    "run",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="transfers",
                        to="campaigns.run",
                    ),
                ),
                (
                    "source_endpoint",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="campaigns.endpoint",
                    ),
                ),
            ],
            options={
                "ordering": ["run", "index"],
            },
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(fields=["campaign", "-created"], name="campaigns_r_campaig_8bb737_idx"),
        ),
        migrations.AddConstraint(
            model_name="ftslinklimit",
            constraint=models.UniqueConstraint(fields=("run", "symbolicname"), name="ftslinklimit_unique"),
        ),
        migrations.AddConstraint(
            model_name="runstep",
            constraint=models.UniqueConstraint(fields=("run", "index"), name="runstep_unique_index"),
        ),
        migrations.AddIndex(
            model_name="transfer",
            index=models.Index(
                condition=models.Q(("state", "queued")), fields=["run", "index"], name="transfer_queued_idx"
            ),
        ),
        migrations.AddIndex(
            model_name="transfer",
            index=models.Index(fields=["run", "finished_at"], name="transfer_run_time_idx"),
        ),
        migrations.AddIndex(
            model_name="transfer",
            index=models.Index(
                condition=models.Q(("state", "failed")), fields=["run", "error_category"], name="transfer_run_error_idx"
            ),
        ),
        migrations.AddConstraint(
            model_name="transfer",
            constraint=models.UniqueConstraint(fields=("run", "index"), name="transfer_unique_index"),
        ),
    ]

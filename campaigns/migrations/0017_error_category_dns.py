"""Transfer error categories: "dns", a host name that does not resolve (was "other")."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("campaigns", "0016_engine_options"),
    ]

    operations = [
        migrations.AlterField(
            model_name="transfer",
            name="error_category",
            field=models.CharField(
                blank=True,
                choices=[
                    ("", "None"),
                    ("checksum_mismatch", "Checksum mismatch"),
                    ("checksum_timeout", "Checksum timeout"),
                    ("transfer_timeout", "Transfer timeout"),
                    ("http_5xx", "HTTP 5xx"),
                    ("tpc_failure", "TPC failure"),
                    ("connection_refused", "Connection refused"),
                    ("dns", "Host name not resolved (DNS)"),
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
    ]

"""The FTS app's models: the FTS3 instances StorageOps drives, the link limits it changed on
them, and what FTS said of each transfer it copied (its job and file ids).

Their tables kept the names they had when these models were the campaigns app's
(campaigns_ftsinstance, campaigns_ftslinklimit): the move changed no table (migrations
campaigns 0029, fts 0001).
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from campaigns.models.definitions import Campaign, validate_absolute_path
from campaigns.models.transfer_extras import ExtraColumn
from storageops.models import BaseModel
from storageops.sealed import SealedTextField
from storageops.validators import validate_http_url


def refuse_to_delete_instances_in_use(instance_ids) -> None:
    """What on_delete=PROTECT did when campaigns named their FTS instance by a foreign key: they
    name it in engine_options now, so the deletes below check first (before any transaction
    begins, as PROTECT's collector did, so a refusal leaves the request's transaction usable)."""
    using = Campaign.objects.filter(engine_options__instance__in=list(instance_ids))
    if using.exists():
        names = ", ".join(using.values_list("name", flat=True)[:5])
        raise models.ProtectedError(f"FTS instances in use by campaigns ({names}): change them first.", set(using))


class FtsInstanceQuerySet(models.QuerySet):
    def delete(self):
        refuse_to_delete_instances_in_use(self.values_list("pk", flat=True))
        return super().delete()


class FtsInstance(BaseModel):
    """An FTS3 REST endpoint and the credentials StorageOps uses on it (secrets write-only)."""

    name = models.CharField(max_length=100, unique=True)
    url = models.CharField(
        "REST URL",
        max_length=300,
        validators=[validate_http_url],
        help_text="The FTS3 REST server, e.g. https://fts3-pilot.cern.ch:8446",
    )
    # X.509: a proxy file serves as both (cert and key the same path); or a certificate and key.
    x509_cert = models.CharField(
        "X.509 certificate or proxy",
        max_length=500,
        blank=True,
        validators=[validate_absolute_path],
        help_text="Path on the worker, e.g. /tmp/x509up_u1000.",
    )
    x509_key = models.CharField(
        "X.509 key",
        max_length=500,
        blank=True,
        validators=[validate_absolute_path],
        help_text="Empty for a proxy file.",
    )
    bearer_token = SealedTextField(blank=True, help_text="OIDC access token sent as Bearer (write-only).")
    ca_path = models.CharField(
        "CA path",
        max_length=500,
        blank=True,
        validators=[validate_absolute_path],
        help_text="CA bundle file or hashed CA directory to verify the server; empty: the system's.",
    )
    verify_tls = models.BooleanField("verify the server's certificate", default=True)
    files_per_job = models.PositiveIntegerField(
        default=100,
        validators=[MinValueValidator(1), MaxValueValidator(1000)],
        help_text="Files in each bulk job StorageOps submits.",
    )
    manage_link_limits = models.BooleanField(
        default=False,
        help_text="Set min_active = max_active on the run's links for each concurrency step and restore them "
        "after (needs FTS's config role).",
    )
    poll_seconds = models.FloatField(
        "poll interval (s)", default=2.0, validators=[MinValueValidator(0.2), MaxValueValidator(300)]
    )
    notes = models.TextField(blank=True)

    objects = FtsInstanceQuerySet.as_manager()

    class Meta:
        db_table = "campaigns_ftsinstance"
        ordering = ["name"]
        verbose_name = "FTS instance"

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if self.x509_key and not self.x509_cert:
            raise ValidationError({"x509_cert": "A key needs its certificate."})
        if self.x509_cert and self.bearer_token:
            raise ValidationError({"bearer_token": "Use either an X.509 credential or a bearer token, not both."})

    def delete(self, *args, **kwargs):
        refuse_to_delete_instances_in_use([self.pk])
        return super().delete(*args, **kwargs)

    @property
    def auth_kind(self) -> str:
        if self.bearer_token:
            return "token"
        return "x509" if self.x509_cert else "none"


class FtsLinkLimit(models.Model):
    """One link configuration StorageOps set on an FTS for a run, with what was there before.

    Kept in the database (not in memory) so a restore happens even after a driver crash:
    whichever worker finishes the run restores every row not yet restored.
    """

    run = models.ForeignKey("campaigns.Run", on_delete=models.CASCADE, related_name="fts_link_limits")
    symbolicname = models.CharField(max_length=150)
    source_se = models.CharField(max_length=300)
    dest_se = models.CharField(max_length=300)
    # The link config as FTS returned it before the first change; null: there was none.
    previous = models.JSONField(null=True, blank=True)
    applied = models.JSONField(default=dict, help_text="The last values StorageOps set.")
    changed_at = models.DateTimeField()
    restored_at = models.DateTimeField(null=True, blank=True)
    restore_error = models.TextField(blank=True)

    class Meta:
        db_table = "campaigns_ftslinklimit"
        ordering = ["run", "symbolicname"]
        constraints = [models.UniqueConstraint(fields=["run", "symbolicname"], name="ftslinklimit_unique")]

    def __str__(self) -> str:
        return f"{self.run_id} {self.symbolicname}"


class FtsTransfer(models.Model):
    """What FTS said of one transfer it was given: the job that holds it and FTS's id of its file.

    A row is written when the transfer is submitted (its job) and completed when FTS reports
    the file final (its file id); a transfer never handed to FTS has none. Kept out of
    Transfer, whose every row (of every engine) would otherwise carry two FTS columns.
    """

    # The database deletes the row with its transfer (ON DELETE CASCADE, added by fts 0002), not
    # Django: a relation Django cascades would make it read every transfer of a run or a
    # retention batch into memory to delete them, where it now sends one DELETE.
    transfer = models.OneToOneField(
        "campaigns.Transfer", on_delete=models.DO_NOTHING, db_constraint=False, primary_key=True, related_name="fts"
    )
    job_id = models.CharField("FTS job id", max_length=64, blank=True, default="")
    file_id = models.BigIntegerField("FTS file id", null=True, blank=True)

    class Meta:
        verbose_name = "FTS transfer"

    def __str__(self) -> str:
        return f"{self.transfer_id} {self.job_id}"


# FtsTransfer's values as the transfer exports and API show them, under the names they had
# when they were Transfer's columns (registered in FtsConfig.ready()).
TRANSFER_COLUMNS = (
    ExtraColumn("fts_job_id", "fts__job_id", empty="", help_text="The FTS job that holds the transfer."),
    ExtraColumn("fts_file_id", "fts__file_id", kind=int, help_text="FTS's id of the transfer's file."),
)

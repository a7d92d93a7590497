"""Model mixins shared by every StorageOps app."""

from __future__ import annotations

from django.db import models


class BaseModel(models.Model):
    """Created/last-updated stamps: every object a user edits can say when it last changed."""

    created = models.DateTimeField(auto_now_add=True)
    last_updated = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True

    def save(self, *args, **kwargs):
        # Validation runs on every save, not only in forms, so that the admin, the API,
        # management commands and services can never store a knob a run cannot honour.
        self.full_clean()
        super().save(*args, **kwargs)


class ChangeRecord(models.Model):
    """One change of a StorageOps object: who, when, through what, before and after."""

    time = models.DateTimeField(auto_now_add=True, db_index=True)
    user = models.ForeignKey("auth.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    user_name = models.CharField(max_length=150, blank=True, help_text="Kept if the user is deleted.")
    via = models.CharField(max_length=10, help_text="web, api, task or command")
    request_id = models.CharField(max_length=64, blank=True)
    action = models.CharField(max_length=10, choices=[("create", "Created"), ("update", "Updated"),
                                                      ("delete", "Deleted")])  # fmt: skip
    object_type = models.CharField(max_length=100, help_text="app_label.model")
    object_id = models.BigIntegerField()
    object_repr = models.CharField(max_length=200)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    changes = models.JSONField(default=dict, help_text="field -> [before, after]")

    class Meta:
        ordering = ["-time", "-pk"]
        indexes = [models.Index(fields=["object_type", "object_id", "time"], name="change_object_idx")]

    def __str__(self) -> str:
        return f"{self.time:%Y-%m-%d %H:%M} {self.user_name or self.via} {self.action} {self.object_repr}"


class APIToken(models.Model):
    """A token for automation. Only a hash is stored; the plaintext is shown once, at creation.

    The token acts with the permissions of its role, and never more than its owner has.
    """

    ROLE_CHOICES = [("viewer", "Viewer"), ("operator", "Operator"), ("admin", "Admin")]

    user = models.ForeignKey("auth.User", on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, help_text="What it is for, e.g. 'ansible on door hosts'.")
    role = models.CharField(max_length=10, choices=ROLE_CHOICES, default="viewer")
    prefix = models.CharField(max_length=12, unique=True, help_text="The first characters, to find and show it.")
    key_hash = models.CharField(max_length=64)
    created = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…, {self.role})"


class ExternalIdentity(models.Model):
    """A user as the site's OpenID provider knows them: its issuer and subject (`iss`, `sub`).

    Accounts are matched on these, never on an e-mail address or a user name, so a provider
    account cannot take over a local (break-glass) account that happens to share a name.
    """

    user = models.ForeignKey("auth.User", on_delete=models.CASCADE, related_name="external_identities")
    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)
    groups = models.JSONField(default=list, blank=True, help_text="The groups the provider named at the last sign-in.")
    last_seen = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="external_identity_unique")]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"

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

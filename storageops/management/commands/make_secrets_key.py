"""`manage.py make_secrets_key`: print a new key for STORAGEOPS_SECRETS_KEY(_FILE)."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from storageops.sealed import make_key


class Command(BaseCommand):
    help = (
        "Print a new Fernet key for sealing secrets: set it as STORAGEOPS_SECRETS_KEY, or put it in the file "
        "named by STORAGEOPS_SECRETS_KEY_FILE (mode 0600), first, to rotate (then run rotate_secrets_key)."
    )

    def handle(self, *args, **options) -> None:
        self.stdout.write(make_key())

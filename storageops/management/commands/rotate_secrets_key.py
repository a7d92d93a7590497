"""`manage.py rotate_secrets_key [--clear-unreadable]`: seal every secret in the database again
with the first key of STORAGEOPS_SECRETS_KEY(_FILE), and those stored in the clear too.

To change the key: make a new one (make_secrets_key), put it first and keep the old one after
it, restart, run this; then the old key opens nothing any more and may be removed. All in one
transaction, the rows locked: a value changed meanwhile is not overwritten, and a value no key
opens stops it with nothing changed (unless --clear-unreadable empties those, their key lost).
"""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from storageops.sealed import SecretsKeyError, is_sealed, seal, sealed_fields, store, stored_values, unseal


class Command(BaseCommand):
    help = "Seal every secret in the database again with the first key of STORAGEOPS_SECRETS_KEY(_FILE)."

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--clear-unreadable",
            action="store_true",
            help="Empty the values no key opens (their key is lost), naming each, instead of stopping; "
            "set them again afterwards.",
        )

    def handle(self, *args, clear_unreadable: bool = False, **options) -> None:
        try:
            with transaction.atomic():
                lines = [self._rotate(model, field.name, clear_unreadable) for model, field in sealed_fields()]
        except SecretsKeyError as exc:
            raise CommandError(f"{exc} Nothing was changed.") from None
        for line in lines:
            self.stdout.write(line)
        keys = len(settings.STORAGEOPS_SECRETS_KEYS)
        if keys > 1:
            self.stdout.write(f"Every secret is sealed with the first of the {keys} keys: the others may be removed.")

    def _rotate(self, model, name: str, clear_unreadable: bool) -> str:
        label = f"{model._meta.label}.{name}"
        resealed = sealed_now = emptied = 0
        for pk, stored in stored_values(model, name, lock=True):
            what = f"{label} of {model._meta.verbose_name} #{pk}"
            try:
                clear = unseal(stored, what)
            except SecretsKeyError:
                if not (clear_unreadable and settings.STORAGEOPS_SECRETS_KEYS):
                    raise
                store(model, pk, name, "")
                self.stdout.write(f"Emptied {what}: no key opens it; set it again.")
                emptied += 1
                continue
            store(model, pk, name, seal(clear, what))
            if is_sealed(stored):
                resealed += 1
            else:
                sealed_now += 1
        words = [f"{resealed} sealed again"]
        if sealed_now:
            words.append(f"{sealed_now} sealed that were in the clear")
        if emptied:
            words.append(f"{emptied} emptied")
        return f"{label}: {', '.join(words)}."

"""Secrets sealed at rest: model fields whose values the database only ever holds encrypted.

A value is sealed with Fernet (AES-128-CBC and HMAC-SHA256, from ``cryptography``) on its way
into the database and opened on its way out, so the application reads and writes the clear
text as before while a dump, a backup or a replica of the database holds only
``sealed:v1:<Fernet token>``. The prefix tells a sealed value from a clear one stored before
sealing (read as it is, and sealed by the data migrations and by ``rotate_secrets_key``).

The keys come from STORAGEOPS_SECRETS_KEY (comma-separated) or STORAGEOPS_SECRETS_KEY_FILE (one
a line), read by the settings into STORAGEOPS_SECRETS_KEYS: the first key seals, every key opens
(MultiFernet), which is how a key is rotated. An empty value stays empty and needs no key, so a
site that keeps no secret needs none; a secret stored or read without a key, or sealed with a
key that is not among them, is an error that says so (never the sealed text taken for the secret).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.apps import apps as installed_apps
from django.conf import settings
from django.core import validators
from django.core.exceptions import ImproperlyConfigured
from django.db import models
from django.db.models import ExpressionWrapper, F, Value
from django.utils.functional import cached_property

PREFIX = "sealed:v1:"
KEY_VARIABLES = "STORAGEOPS_SECRETS_KEY or STORAGEOPS_SECRETS_KEY_FILE"
HOW_TO_MAKE_A_KEY = (
    "Make a key with `python manage.py make_secrets_key` (or `python3 -c 'from cryptography.fernet import Fernet; "
    "print(Fernet.generate_key().decode())'`) and set it in STORAGEOPS_SECRETS_KEY, or put it in a file (mode 0600) "
    "named by STORAGEOPS_SECRETS_KEY_FILE; docs/security.md, Secrets at rest."
)


class SecretsKeyError(ImproperlyConfigured):
    """No key to seal or open a secret with, or none of the keys opens it."""


def make_key() -> str:
    return Fernet.generate_key().decode("ascii")


@functools.lru_cache(maxsize=8)
def _fernet(keys: tuple[str, ...]) -> MultiFernet:
    return MultiFernet([Fernet(key.encode("ascii")) for key in keys])


def _keys(what: str, doing: str) -> MultiFernet:
    keys = tuple(getattr(settings, "STORAGEOPS_SECRETS_KEYS", ()) or ())
    if not keys:
        raise SecretsKeyError(f"{what} must be {doing}, but no key to seal secrets is set ({KEY_VARIABLES}). "
                              f"{HOW_TO_MAKE_A_KEY}")  # fmt: skip
    return _fernet(keys)


def is_sealed(stored: str | None) -> bool:
    return bool(stored) and stored.startswith(PREFIX)


def seal(clear: str, what: str = "a secret") -> str:
    """The stored form of `clear`: sealed with the first key; an empty value stays empty."""
    if not clear:
        return clear
    return PREFIX + _keys(what, "sealed").encrypt(clear.encode("utf-8")).decode("ascii")


def unseal(stored: str, what: str = "a secret") -> str:
    """The clear text of a stored value. Empty stays empty and a value stored before sealing (no
    prefix) is its own clear text; a sealed one needs a key that opens it."""
    if not is_sealed(stored):
        return stored
    fernet = _keys(what, "opened")
    try:
        return fernet.decrypt(stored[len(PREFIX) :].encode("ascii")).decode("utf-8")
    except (InvalidToken, UnicodeError):
        count = len(settings.STORAGEOPS_SECRETS_KEYS)
        raise SecretsKeyError(
            f"{what} is sealed with a key that is not among the {count} key(s) of {KEY_VARIABLES} (or its sealed "
            "text is damaged). Put the key it was sealed with back, after the first one, and run `python manage.py "
            "rotate_secrets_key`; if that key is lost, `rotate_secrets_key --clear-unreadable` empties such values "
            "so that they can be set again."
        ) from None


class SealedTextField(models.TextField):
    """A text whose value is sealed in the database (see the module's docstring).

    Equality lookups on a sealed value cannot match (each sealing differs): look up by other
    fields; ``field=""`` still finds the empty ones."""

    description = "Text sealed at rest"

    @property
    def what(self) -> str:
        model = getattr(self, "model", None)
        return f"{model._meta.label}.{self.name}" if model is not None else (self.name or "a sealed field")

    def from_db_value(self, value, expression, connection):
        return value if value is None else unseal(value, self.what)

    def get_db_prep_save(self, value, connection):
        value = super().get_db_prep_save(value, connection)
        return seal(value, self.what) if isinstance(value, str) and value else value


class SealedCharField(SealedTextField):
    """A one-line sealed value (a webhook URL): a text column, for the sealed form is longer than
    the clear one; max_length bounds the clear text, and forms show a one-line input."""

    description = "One-line text sealed at rest"

    def __init__(self, *args, max_length: int | None = None, **kwargs) -> None:
        super().__init__(*args, max_length=max_length, **kwargs)

    @cached_property
    def validators(self):
        bound = [validators.MaxLengthValidator(self.max_length)] if self.max_length is not None else []
        return [*super().validators, *bound]

    def formfield(self, **kwargs):
        # Field's (a one-line CharField), not TextField's Textarea.
        return models.Field.formfield(self, **{"max_length": self.max_length, **kwargs})


# -- what rotate_secrets_key works on --------------------------------------------------------------
def sealed_fields() -> Iterator[tuple[type[models.Model], SealedTextField]]:
    """Every sealed field of the installed models, by model label."""
    for model in sorted(installed_apps.get_models(), key=lambda m: m._meta.label):
        for field in model._meta.concrete_fields:
            if isinstance(field, SealedTextField):
                yield model, field


def stored_values(model: type[models.Model], name: str, *, lock: bool = False) -> list[tuple[object, str]]:
    """(pk, value as the database holds it) of the rows whose value is not empty: read as plain
    text, so that neither a sealed nor a clear value is opened or refused on the way. lock: the
    rows locked until the transaction ends (inside one)."""
    raw = ExpressionWrapper(F(name), output_field=models.TextField())
    rows = model._base_manager.exclude(**{name: ""}).annotate(_stored=raw).order_by("pk")
    if lock:
        rows = rows.select_for_update()
    return list(rows.values_list("pk", "_stored"))


def store(model: type[models.Model], pk: object, name: str, stored: str) -> None:
    """Write `stored` as it is (a Value is not sealed again by the field)."""
    model._base_manager.filter(pk=pk).update(**{name: Value(stored, output_field=models.TextField())})

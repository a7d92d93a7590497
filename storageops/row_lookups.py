"""The lookups every request makes, by SQL made once per process.

Each API request finds its token and its user, each page request its session and its user, and
every open run page polls its run's progress. The ORM compiled the same query anew every time:
half of a 0.8 ms lookup (benchmarks/request_profile.py).
Here the statement is made once from the models' own metadata, and each row becomes a model
instance the way the ORM makes one (Model.from_db), so what callers get is unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

from django.contrib.auth import get_user_model
from django.contrib.sessions.backends.db import SessionStore as DatabaseSessionStore
from django.db import connection, models
from django.utils import timezone

from storageops.models import APIToken


def _columns(model: type[models.Model], alias: str) -> list[str]:
    quote = connection.ops.quote_name
    return [f"{alias}.{quote(f.column)}" for f in model._meta.concrete_fields]


def _instance(model: type[models.Model], values: Sequence) -> models.Model:
    return model.from_db(connection.alias, [f.attname for f in model._meta.concrete_fields], values)


@cache
def _user_sql() -> str:
    user = get_user_model()
    quote = connection.ops.quote_name
    # Names of the model's table and columns; the key is the one parameter.
    return (
        f"SELECT {', '.join(_columns(user, 'u'))} FROM {quote(user._meta.db_table)} u "  # noqa: S608
        f"WHERE u.{quote(user._meta.pk.column)} = %s"
    )


@cache
def _token_sql() -> str:
    user = get_user_model()
    quote = connection.ops.quote_name
    token_user = APIToken._meta.get_field("user").column
    return (
        f"SELECT {', '.join(_columns(APIToken, 't') + _columns(user, 'u'))} "  # noqa: S608
        f"FROM {quote(APIToken._meta.db_table)} t JOIN {quote(user._meta.db_table)} u "
        f"ON u.{quote(user._meta.pk.column)} = t.{quote(token_user)} "
        f"WHERE t.{quote(APIToken._meta.get_field('prefix').column)} = %s"
    )


def user_by_pk(pk) -> models.Model | None:
    """The user of primary key `pk`, or None."""
    user = get_user_model()
    try:
        pk = user._meta.pk.to_python(pk)
    except Exception:  # noqa: BLE001 - a session holding garbage: no user, as ModelBackend says
        return None
    with connection.cursor() as cursor:
        cursor.execute(_user_sql(), [pk])
        row = cursor.fetchone()
    return None if row is None else _instance(user, row)


def token_by_prefix(prefix: str) -> APIToken | None:
    """The token of `prefix` (unique) with its user loaded, or None."""
    with connection.cursor() as cursor:
        cursor.execute(_token_sql(), [prefix])
        row = cursor.fetchone()
    if row is None:
        return None
    split = len(APIToken._meta.concrete_fields)
    token = _instance(APIToken, row[:split])
    APIToken.user.field.set_cached_value(token, _instance(get_user_model(), row[split:]))
    return token


@cache
def _session_sql() -> str:
    session = DatabaseSessionStore.get_model_class()
    quote = connection.ops.quote_name
    return (
        f"SELECT {', '.join(_columns(session, 's'))} FROM {quote(session._meta.db_table)} s "  # noqa: S608
        f"WHERE s.{quote('session_key')} = %s AND s.{quote('expire_date')} > %s"
    )


class SessionStore(DatabaseSessionStore):
    """Django's database sessions (SESSION_ENGINE = "storageops.row_lookups"), the session of a
    page request read by a statement made once."""

    def _get_session_from_db(self):
        with connection.cursor() as cursor:
            cursor.execute(_session_sql(), [self.session_key, timezone.now()])
            row = cursor.fetchone()
        if row is None:
            self._session_key = None  # as Django's: an unknown or expired key is dropped
            return None
        return _instance(self.model, row)


@cache
def _fields_sql(model: type[models.Model], names: tuple[str, ...]) -> tuple[str, tuple[models.Field, ...]]:
    # In the model's own order: Model.from_db places the values it is given by that order.
    wanted = {model._meta.get_field(name) for name in names}
    fields = tuple(f for f in model._meta.concrete_fields if f in wanted)
    quote = connection.ops.quote_name
    return (
        f"SELECT {', '.join(quote(f.column) for f in fields)} FROM {quote(model._meta.db_table)} "  # noqa: S608
        f"WHERE {quote(model._meta.pk.column)} = %s",
        fields,
    )


def some_fields(model: type[models.Model], pk: int, names: tuple[str, ...]) -> models.Model | None:
    """The row of `pk` with only the fields `names` loaded (the others deferred, as ``.only()``
    leaves them: each is read when first touched), or None when there is no such row."""
    sql, fields = _fields_sql(model, names)
    with connection.cursor() as cursor:
        cursor.execute(sql, [pk])
        row = cursor.fetchone()
    if row is None:
        return None
    # The ORM's own conversions of what the driver gives (JSON text, for one).
    values = [
        f.from_db_value(value, None, connection) if hasattr(f, "from_db_value") else value
        for f, value in zip(fields, row, strict=True)
    ]
    return model.from_db(connection.alias, [f.attname for f in fields], values)

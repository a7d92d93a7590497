"""The rows post_migrate writes, written back from a copy after each transactional test's flush.

Django flushes the database after every transactional test and then emits post_migrate, whose
receivers build again what migrate built: content types, permissions, the roles' groups and
their permissions, the built-in beat schedules. That is the same rows every time, and cost
0.14 s of the test process's CPU per flush (and the server's for its ~150 statements), for
each of some 350 transactional tests. The first flush of a test process emits the signal for
real; the tables it filled are copied then (``COPY … TO STDOUT``, a few kB) and written back
after every later flush in one transaction: 2 ms.

The rows come back with the ids the first emit gave them, so the content type cache is cleared
as create_contenttypes clears it. A copy that no longer fits the tables (a test that migrated
the schema and left it changed) is rolled back and the signal emitted for real, as before.
"""

from __future__ import annotations

from collections.abc import Callable

from django.contrib.contenttypes.models import ContentType
from django.core.management.commands import flush
from django.db import DatabaseError, connections, transaction

Emit = Callable[..., None]

_copies: dict[str, dict[str, bytes]] = {}


def _filled_tables(alias: str) -> list[str]:
    connection = connections[alias]
    tables = connection.introspection.django_table_names(only_existing=True, include_views=False)
    with connection.cursor() as cursor:
        filled = []
        for table in sorted(tables):
            # A table name the schema's own introspection gave, quoted.
            cursor.execute(f"SELECT EXISTS (SELECT 1 FROM {connection.ops.quote_name(table)})")  # noqa: S608
            if cursor.fetchone()[0]:
                filled.append(table)
    return filled


def _copy_out(alias: str, tables: list[str]) -> dict[str, bytes]:
    connection = connections[alias]
    rows = {}
    with connection.cursor() as cursor:
        for table in tables:
            with cursor.copy(f"COPY {connection.ops.quote_name(table)} TO STDOUT") as copy:
                rows[table] = b"".join(bytes(block) for block in copy)
    return rows


def _copy_in(alias: str, rows: dict[str, bytes]) -> None:
    connection = connections[alias]
    # Django's foreign keys on PostgreSQL are DEFERRABLE INITIALLY DEFERRED: any order commits.
    with transaction.atomic(using=alias), connection.cursor() as cursor:
        for table, data in rows.items():
            with cursor.copy(f"COPY {connection.ops.quote_name(table)} FROM STDIN") as copy:
                copy.write(data)


def replaying(emit: Emit) -> Emit:
    """``emit_post_migrate_signal`` as flush calls it: for real the first time, then from the copy."""

    def emit_or_replay(verbosity: int, interactive: bool, db: str, **kwargs) -> None:
        rows = _copies.get(db)
        if rows is not None:
            try:
                _copy_in(db, rows)
            except DatabaseError:
                _copies.pop(db, None)
            else:
                ContentType.objects.clear_cache()
                return
        emit(verbosity, interactive, db, **kwargs)
        if db not in _copies:
            _copies[db] = _copy_out(db, _filled_tables(db))

    return emit_or_replay


def install() -> Callable[[], None]:
    """Make flush replay post_migrate's rows; returns what undoes it."""
    real = flush.emit_post_migrate_signal
    flush.emit_post_migrate_signal = replaying(real)

    def undo() -> None:
        flush.emit_post_migrate_signal = real
        _copies.clear()

    return undo

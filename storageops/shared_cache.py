"""The key function of the "shared" (Redis) cache: every key carries the database's name.

Two sites, or two pytest workers with databases of their own, may share one Redis; their runs
have the same ids, so a key without the database would hand one site's run to the other. The
name is read when the key is made (pytest-django renames the database after settings load)."""

from __future__ import annotations

from django.db import connection


def key(key: str, key_prefix: str, version: int) -> str:
    return f"storageops:{connection.settings_dict['NAME']}:{key_prefix}:{version}:{key}"

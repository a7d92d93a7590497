"""Typed readers for settings taken from the environment.

A bad value must stop the process at start-up with a message naming the variable,
not surface hours later as a confusing failure inside a run.
"""

from __future__ import annotations

import base64
import os

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean (use 1/0, true/false, yes/no, on/off)")


def env_int(name: str, default: int, *, minimum: int | None = None, maximum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value} is below the minimum {minimum}")
    if maximum is not None and value > maximum:
        raise ImproperlyConfigured(f"{name}={value} is above the maximum {maximum}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_secret(name: str, default: str) -> str:
    """Read NAME, or the contents of the file named by NAME_FILE (Docker/K8s secrets)."""
    path = os.environ.get(f"{name}_FILE")
    if path:
        try:
            with open(path, encoding="utf-8") as handle:
                return handle.read().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE={path!r} cannot be read: {exc}") from None
    return os.environ.get(name, default)


def env_secret_list(name: str) -> list[str]:
    """NAME as a comma-separated list, or the lines of the file named by NAME_FILE (blank lines
    and lines starting with # left out); the file wins, as in env_secret."""
    path = os.environ.get(f"{name}_FILE")
    if path:
        try:
            with open(path, encoding="utf-8") as handle:
                lines = handle.read().splitlines()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE={path!r} cannot be read: {exc}") from None
        return [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]
    return [item.strip() for item in os.environ.get(name, "").split(",") if item.strip()]


def env_fernet_keys(name: str) -> list[str]:
    """Fernet keys from NAME (comma-separated) or NAME_FILE (one a line), each checked to be one:
    32 bytes in url-safe base64. A key is never repeated in the message (it is a secret)."""
    keys = env_secret_list(name)
    where = f"{name}_FILE={os.environ[f'{name}_FILE']!r}" if os.environ.get(f"{name}_FILE") else name
    for number, key in enumerate(keys, 1):
        try:
            raw = base64.urlsafe_b64decode(key.encode("ascii"))
        except (ValueError, UnicodeEncodeError):  # binascii.Error is a ValueError
            raw = b""
        if len(raw) != 32:
            raise ImproperlyConfigured(
                f"{where}: key {number} of {len(keys)} is not a Fernet key (44 characters of url-safe base64, "
                "32 bytes); make one with `python manage.py make_secrets_key`"
            )
    return keys

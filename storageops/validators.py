"""Validators for user-supplied values shared by the apps."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.core.exceptions import ValidationError

# Schemes gfal2 can drive (with Debian's file, http, xrootd and mock plugins) plus FTS' own.
TRANSFER_SCHEMES = ("root", "roots", "xroot", "davs", "https", "http", "dav", "file", "mock")


def validate_transfer_url(value: str) -> None:
    """A storage URL prefix: a known scheme, a host (except file://), no user text tricks."""
    if any(ch.isspace() for ch in value) or "\x00" in value:
        raise ValidationError("A URL must not contain spaces or control characters.")
    parts = urlsplit(value)
    if parts.scheme not in TRANSFER_SCHEMES:
        raise ValidationError(
            "Unsupported URL scheme %(scheme)r: use one of %(schemes)s.",
            params={"scheme": parts.scheme or "(none)", "schemes": ", ".join(TRANSFER_SCHEMES)},
        )
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
            raise ValidationError("A file:// URL needs an absolute path, e.g. file:///data/test/.")
    elif not parts.hostname:
        raise ValidationError("The URL needs a host, e.g. root://door1.example.org:1094//data/.")
    try:
        _ = parts.port
    except ValueError:
        raise ValidationError("The URL's port is not a number between 0 and 65535.") from None
    if parts.fragment:
        raise ValidationError("A storage URL must not have a #fragment.")


def validate_http_url(value: str) -> None:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValidationError("Use an http:// or https:// URL with a host.")
    try:
        _ = parts.port
    except ValueError:
        raise ValidationError("The URL's port is not a number between 0 and 65535.") from None


def validate_relative_path(value: str) -> None:
    """A path below an endpoint's prefix: never absolute, never climbing out with '..'."""
    if value.startswith("/") or "\x00" in value:
        raise ValidationError("Give a path relative to the endpoint's prefix (no leading '/').")
    if any(part == ".." for part in value.split("/")):
        raise ValidationError("A path may not contain '..'.")
    if any(ch.isspace() for ch in value) or any(ch in value for ch in "?#"):
        raise ValidationError("A path may not contain spaces, '?' or '#'.")

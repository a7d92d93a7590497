"""Validators for user-supplied values shared by the apps."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

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


def _decoded(value: str) -> str:
    """value percent-decoded until it no longer changes: a door or a proxy may decode once
    more than we do, so %252e%252e must be seen as the '..' it can become."""
    for _ in range(5):
        decoded = unquote(value)
        if decoded == value:
            break
        value = decoded
    return value


def validate_relative_path(value: str) -> None:
    """A path below an endpoint's prefix: never absolute, never climbing out with '..' in any
    encoding (the URL a run builds from it is decoded by gfal2 and the door)."""
    decoded = _decoded(value)
    if value.startswith("/") or decoded.startswith("/") or "\x00" in decoded:
        raise ValidationError("Give a path relative to the endpoint's prefix (no leading '/').")
    if any(part == ".." for part in decoded.replace("\\", "/").split("/")):
        raise ValidationError("A path may not contain '..' (percent-encoded or not).")
    if any(ch.isspace() for ch in value) or any(ch in value for ch in "?#"):
        raise ValidationError("A path may not contain spaces, '?' or '#'.")

"""Validators for user-supplied values shared by the apps."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

from django.core.exceptions import ValidationError

# The widest values the columns hold (PostgreSQL's int4 and bigint): a value past them is a
# validation error naming the field, checked before a query, never a database error.
MAX_INT32 = 2**31 - 1
MAX_ROW_ID = 2**63 - 1

# Schemes gfal2 can drive (with Debian's file, http, xrootd, gridftp and mock plugins), FTS too.
TRANSFER_SCHEMES = ("root", "roots", "xroot", "davs", "https", "http", "dav", "gsiftp", "file", "mock")


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


def parse_url_list(value: str, limit: int) -> list[str]:
    """URLs one a line (blank lines and '#' comments ignored), each a storage URL, duplicates
    dropped in order; ValidationError naming the line of the first bad one, or too many."""
    urls: list[str] = []
    seen: set[str] = set()
    for number, line in enumerate(value.splitlines(), start=1):
        url = line.strip()
        if not url or url.startswith("#"):
            continue
        try:
            validate_transfer_url(url)
        except ValidationError as exc:
            raise ValidationError(f"Line {number} ({url[:80]!r}): {' '.join(exc.messages)}") from None
        if urlsplit(url).path.endswith("/"):
            raise ValidationError(f"Line {number} ({url[:80]!r}) names a folder: list files, one a line.")
        if url not in seen:
            seen.add(url)
            urls.append(url)
    if len(urls) > limit:
        raise ValidationError(f"{len(urls)} URLs: at most {limit} (STORAGEOPS_MAX_LISTED_SOURCES).")
    return urls


def validate_source_url_list(value: str) -> None:
    from django.conf import settings

    parse_url_list(value, settings.STORAGEOPS_MAX_LISTED_SOURCES)


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


def is_below(url: str, prefix: str) -> bool:
    """The URL lies below an endpoint's URL prefix (root://d:1094//data covers //data/x, not //database)."""
    return url.startswith(prefix if prefix.endswith("/") else prefix + "/")


def urls_outside(urls: list[str], prefixes: list[str]) -> list[str]:
    """The URLs that are below none of the prefixes."""
    return [url for url in urls if not any(is_below(url, prefix) for prefix in prefixes)]


def check_source_urls(text: str, source_urls: list[str], limit: int) -> str | None:
    """What is wrong with a URL list for these source endpoints, or None."""
    try:
        urls = parse_url_list(text, limit)
    except ValidationError as exc:
        return " ".join(exc.messages)
    outside = urls_outside(urls, source_urls)
    if outside:
        more = f" (and {len(outside) - 1} more)" if len(outside) > 1 else ""
        return f"{outside[0]}{more} is below none of the chosen source endpoints."
    return None

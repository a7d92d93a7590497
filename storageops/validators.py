"""Validators for user-supplied values shared by the apps."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.core.exceptions import ValidationError

from storageops import paths

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
    try:
        parts = urlsplit(value)
    except ValueError:  # e.g. an unclosed '[' of an IPv6 host
        raise ValidationError("The URL cannot be read (an unclosed '[' of an IPv6 host?).") from None
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
    paths.refuse_tricks(value)


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


def validate_relative_path(value: str) -> None:
    """A path below an endpoint's prefix (storageops.paths: the one rule)."""
    paths.check_relative_path(value)


def validate_absolute_path(value: str) -> None:
    """A path on the worker or a host (credentials, watched files), by the one rule."""
    paths.confine_local(value)


def validate_endpoint_url(value: str) -> None:
    """An endpoint's URL prefix: a storage URL that passes the one path rule (file://: below
    STORAGEOPS_FILE_ROOTS)."""
    validate_transfer_url(value)
    paths.check_endpoint_url(value)


def urls_outside(urls: list[str], prefixes: list[str]) -> list[tuple[str, str]]:
    """(URL, why) of each URL below none of the prefixes."""
    outside = []
    for url in urls:
        if paths.owner(url, prefixes) is None:
            outside.append((url, _why_outside(url, prefixes)))
    return outside


def _why_outside(url: str, prefixes: list[str]) -> str:
    try:
        paths.refuse_tricks(url)
    except ValidationError as exc:
        return " ".join(exc.messages)
    return "is below none of the chosen source endpoints."


def check_source_urls(text: str, source_urls: list[str], limit: int) -> str | None:
    """What is wrong with a URL list for these source endpoints, or None."""
    try:
        urls = parse_url_list(text, limit)
    except ValidationError as exc:
        return " ".join(exc.messages)
    outside = urls_outside(urls, source_urls)
    if outside:
        (url, why), more = outside[0], f" (and {len(outside) - 1} more)" if len(outside) > 1 else ""
        return f"{url}{more} {why}"
    return None


def folder_errors(folders: dict[str, str], endpoint_urls: list[str]) -> dict[str, str]:
    """{field: what is wrong} for relative folders (field -> path) below each of these endpoints,
    by the one path rule: file:// resolves its links, so a folder that is a link to outside its
    endpoint is refused when it is named, not only when it is used."""
    errors: dict[str, str] = {}
    for field, path in folders.items():
        try:
            paths.check_relative_path(path)
        except ValidationError:
            continue  # the field's own validator says what is wrong with it, once
        for url in endpoint_urls:
            try:
                paths.below_endpoint(path, url)
            except ValidationError as exc:
                errors[field] = f"Below {url}: {' '.join(exc.messages)}"
                break
    return errors

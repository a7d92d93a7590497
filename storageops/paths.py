"""The one path rule: whatever a user names lies below the place it belongs to.

Every path StorageOps takes from a user, or builds from what a user gave, goes through
``confine``: an endpoint's URL prefix (below the origin of its URL; a file:// one below a root
the deployment names in STORAGEOPS_FILE_ROOTS), a campaign's source and destination paths, the
URLs of a source list and the files a listed folder gives, the paths a collector watches or
writes host tests in, a readiness check's probe files, and what clean-up deletes. The forms,
the API and the models call it when the value comes in; readiness, existing-data listing and
clean-up call it again when they use the value (a row stored before this rule, a folder that
became a symlink, a root the deployment took away).

The rule, in order:
- no control character (NUL included) and no backslash, in the text as given and after each
  percent-decoding, decoding until the text no longer changes (a door or a proxy may decode
  once more than we do: ``%252e%252e`` becomes ``..`` two decodings later);
- no ``..`` segment at any stage (``..``, ``%2e%2e``, ``.%2e``, ``..%2f`` ...): refused, not
  normalised away, since a door may resolve it differently than we do;
- the same scheme, host and port as the place it must lie below;
- below it by whole path components, after dropping empty and ``.`` segments: ``/data2`` is
  not below ``/data``, and ``//`` changes nothing;
- for file:// (local to this process), the same again with symlinks resolved on both sides.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from urllib.parse import unquote, urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError

# More decodings than this and the text is refused: nothing a run writes is encoded so deep.
MAX_DECODINGS = 4
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
# What URL ports mean when a URL leaves them out, so that root://h//x is the same door as root://h:1094//x.
DEFAULT_PORTS = {
    "root": 1094, "roots": 1094, "xroot": 1094, "xroots": 1094,
    "https": 443, "davs": 443, "http": 80, "dav": 80, "gsiftp": 2811,
}  # fmt: skip
# A relative path is judged as it would be below any endpoint: the one it will meet is not
# known yet when a campaign is saved (it is again when the path is used).
_ANY_ENDPOINT = "root://endpoint.invalid//"


class PathRefused(ValidationError):
    """A path or URL the rule refuses; a ValidationError, so a form or the API names its field."""


def decodings(text: str) -> list[str]:
    """`text` and each percent-decoding of it, until one no longer changes it."""
    stages = [text]
    while len(stages) <= MAX_DECODINGS:
        decoded = unquote(stages[-1])
        if decoded == stages[-1]:
            return stages
        stages.append(decoded)
    raise PathRefused(f"{_show(text)} is percent-encoded more than {MAX_DECODINGS} times over.")


def refuse_tricks(text: str) -> str:
    """`text` fully decoded, once no stage of it has a control character, a backslash or a '..'."""
    stages = decodings(text)
    for stage in stages:
        if _CONTROL.search(stage):
            raise PathRefused(f"{_show(text)} contains a control character (NUL, newline ...), encoded or not.")
        if "\\" in stage:
            raise PathRefused(f"{_show(text)} contains a backslash, encoded or not: use '/'.")
        if ".." in stage.split("/"):
            raise PathRefused(f"{_show(text)} contains '..' (percent-encoded or not): name a place below, not above.")
    return stages[-1]


class _Place:
    """Where a URL points: its origin and the components of its decoded path."""

    def __init__(self, url: str) -> None:
        refuse_tricks(url)
        try:
            parts = urlsplit(url)
        except ValueError:  # e.g. an unclosed '[' of an IPv6 host
            raise PathRefused(f"{_show(url)} is not a URL that can be read.") from None
        if parts.fragment:
            raise PathRefused(f"{_show(url)} has a #fragment.")
        try:
            port = parts.port
        except ValueError:
            raise PathRefused(f"{_show(url)} has a port that is not a number between 0 and 65535.") from None
        scheme = parts.scheme.lower()
        host = (parts.hostname or "").lower()
        if scheme == "file" and host == "localhost":
            host = ""
        self.scheme, self.url = scheme, url
        self.origin = (scheme, parts.username, host, port or DEFAULT_PORTS.get(scheme))
        self.path = refuse_tricks(parts.path)
        self.components = _components(self.path)

    def describe_origin(self) -> str:
        scheme, _, host, port = self.origin
        return f"{scheme}://{host}" + (f":{port}" if port else "")


def _components(path: str) -> list[str]:
    return [part for part in path.split("/") if part not in ("", ".")]


def _is_below(inner: list[str], outer: list[str], strict: bool) -> bool:
    return inner[: len(outer)] == outer and (len(inner) > len(outer) or not strict)


def confine(target: str, base: str, *, strict: bool = False) -> str:
    """The one rule: `target` (a URL, or a path relative to the URL `base`) names `base` or
    something below it (strictly below with `strict`); returns it as a URL. PathRefused says why not.
    """
    if not _SCHEME.match(target):
        refuse_tricks(target)
        if target.startswith("/"):
            raise PathRefused(f"{_show(target)} is an absolute path: give a path relative to the endpoint.")
        target = (base if base.endswith("/") else base + "/") + target
    outer, inner = _Place(base), _Place(target)
    if inner.origin != outer.origin:
        raise PathRefused(
            f"{_show(target)} is on {inner.describe_origin()}, not on {outer.describe_origin()} "
            f"(another scheme, host or port than {_show(base)})."
        )
    if not _is_below(inner.components, outer.components, strict):
        raise PathRefused(f"{_show(target)} is not below {_show(base)}.")
    if inner.scheme == "file" and not _is_below(_resolved(inner.path), _resolved(outer.path), strict):
        # file:// is this machine's: a symlinked folder on the way may lead anywhere.
        raise PathRefused(f"{_show(target)} leads outside {_show(base)} through a symbolic link.")
    return target


def confine_local(path: str, root: str = "/", *, strict: bool = False) -> str:
    """A local path (host tests, watched files, credentials): absolute, below `root` by the same rule."""
    refuse_tricks(path)
    if not path.startswith("/"):
        raise PathRefused(f"{_show(path)} is not an absolute path (it must start with '/').")
    if "?" in path or "#" in path:
        raise PathRefused(f"{_show(path)} contains '?' or '#'.")
    confine("file://" + path, "file://" + root, strict=strict)
    return path


def file_roots() -> list[str]:
    """The folders file:// endpoints may lie in (STORAGEOPS_FILE_ROOTS)."""
    return list(getattr(settings, "STORAGEOPS_FILE_ROOTS", []))


def check_endpoint_url(url: str) -> str:
    """An endpoint's URL prefix: below its own origin, and for file:// below a named root."""
    place = _Place(url)
    if place.scheme != "file":
        parts = urlsplit(url)
        return confine(url, f"{parts.scheme}://{parts.netloc}/")
    roots = file_roots()
    for root in roots:
        if _is_below(place.components, _components(root), strict=False):
            return confine(url, "file://" + root)  # below it by name: links resolved, or why not
    allowed = ":".join(roots) if roots else "empty: this deployment allows no file:// endpoint"
    raise PathRefused(f"{_show(url)} is below no folder file:// endpoints may use (STORAGEOPS_FILE_ROOTS: {allowed}).")


def below_endpoint(target: str, endpoint_url: str, *, strict: bool = False) -> str:
    """`target` below the endpoint, which itself passes the rule for endpoints (checked again:
    at use time, the row may predate the rule or the deployment's roots may have changed)."""
    check_endpoint_url(endpoint_url)
    return confine(target, endpoint_url, strict=strict)


def owner(target: str, endpoint_urls: Iterable[str]) -> str | None:
    """The endpoint URL (the longest, if several) `target` lies below, or None."""
    found = []
    for url in endpoint_urls:
        try:
            below_endpoint(target, url)
        except PathRefused:
            continue
        found.append(url)
    return max(found, key=len, default=None)


def check_relative_path(path: str) -> str:
    """A path below whatever endpoint it will be used with: relative, no '..' in any encoding."""
    confine(path, _ANY_ENDPOINT)
    if any(ch.isspace() for ch in path) or "?" in path or "#" in path:
        raise PathRefused(f"{_show(path)} contains a space, '?' or '#'.")
    return path


def _resolved(path: str) -> list[str]:
    return _components(os.path.realpath(path))


def _show(text: str) -> str:
    """The text as a message may quote it: control characters escaped, long text cut."""
    shown = "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text[:120])
    return f"'{shown}…'" if len(text) > 120 else f"'{shown}'"

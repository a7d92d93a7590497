"""The site's storage-token issuers (an OAuth2 token endpoint, e.g. WLCG/INDIGO IAM or a
Keycloak realm) and the scopes a token for a path asks for (the WLCG JWT profile)."""

from __future__ import annotations

import posixpath
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.urls import reverse

from storageops.models import BaseModel
from storageops.sealed import SealedCharField
from storageops.validators import validate_absolute_path

#: The audience a WLCG token is good for anywhere, when the issuer names none.
ANY_AUDIENCE = "https://wlcg.cern.ch/jwt/v1/any"
#: Schemes whose doors take a bearer token from gfal2 (davix sends it as Authorization).
TOKEN_SCHEMES = frozenset({"davs", "https"})

# A scope's path may hold no space (scopes are space-separated) and none of the characters a
# scope list or a URL would read otherwise.
_PATH_TEXT = RegexValidator(r"^/[A-Za-z0-9._~\-/]*$", "An absolute path of letters, digits and . _ ~ - / only.")
_ONE_LINE = RegexValidator(r"^[\x21-\x7e]+$", "Printable characters without spaces only.")


def validate_https_url(value: str) -> None:
    parts = urlsplit(value)
    if parts.scheme != "https" or not parts.hostname:
        raise ValidationError("Use an https:// URL with a host: the client secret is sent to it.")
    try:
        _ = parts.port
    except ValueError:
        raise ValidationError("The URL's port is not a number between 0 and 65535.") from None
    if parts.query or parts.fragment:
        raise ValidationError("A token endpoint has no query or fragment.")


class TokenIssuer(BaseModel):
    """Where a run's storage tokens come from: the client_credentials grant at `token_endpoint`
    with a client registered there, asking for the scopes each endpoint's work needs."""

    name = models.CharField(max_length=100, unique=True, validators=[RegexValidator(r"^[A-Za-z0-9][A-Za-z0-9 ._\-]*$")])
    token_endpoint = models.CharField(
        max_length=500,
        validators=[validate_https_url],
        help_text="The issuer's OAuth2 token endpoint, e.g. https://iam.example.org/token or "
        "https://sso.example.org/realms/site/protocol/openid-connect/token",
    )
    client_id = models.CharField(max_length=200, validators=[_ONE_LINE])
    client_secret = SealedCharField(
        max_length=500, help_text="The client's secret (write-only; sealed in the database)."
    )
    audience = models.CharField(
        max_length=500,
        blank=True,
        validators=[_ONE_LINE],
        help_text=f"The aud the doors expect (their scitokens audience); empty: {ANY_AUDIENCE}",
    )
    base_path = models.CharField(
        max_length=300,
        default="/",
        validators=[_PATH_TEXT],
        help_text="The storage path the issuer's scopes are relative to (the doors' base_path for this issuer): "
        "with /data, a file /data/atlas/x is in scope storage.read:/atlas.",
    )
    ca_file = models.CharField(
        "CA file",
        max_length=500,
        blank=True,
        validators=[validate_absolute_path],
        help_text="A PEM bundle of the CAs the token endpoint's certificate chains to; empty: the system's.",
    )
    timeout = models.PositiveIntegerField(
        "timeout (s)", default=10, validators=[MinValueValidator(1), MaxValueValidator(120)],
        help_text="Seconds to wait for the token endpoint.",
    )  # fmt: skip
    notes = models.TextField(blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("admin:campaigns_tokenissuer_change", args=[self.pk])

    @property
    def effective_audience(self) -> str:
        return self.audience or ANY_AUDIENCE

    def scope_path(self, path: str) -> str:
        """`path` (a storage namespace path) as the issuer's scopes spell it, relative to its
        base path; ValidationError when it lies outside it (no token can name it)."""
        path = posixpath.normpath("/" + path.lstrip("/"))
        base = posixpath.normpath(self.base_path or "/")
        if base == "/":
            return path
        if path == base:
            return "/"
        if not path.startswith(base + "/"):
            raise ValidationError(f"{path} is not below the issuer {self.name}'s base path {base}.")
        return path[len(base) :]


def scopes(issuer: TokenIssuer, grants: dict[str, tuple[str, ...]]) -> str:
    """The space-separated scope list for `grants` (storage path -> the WLCG verbs on it, e.g.
    {"/data/src": ("read",)}), each path relative to the issuer's base path, in a stable order."""
    parts = []
    for path in sorted(grants):
        relative = issuer.scope_path(path)
        parts += [f"storage.{verb}:{relative}" for verb in sorted(set(grants[path]))]
    return " ".join(parts)

"""Tokens in a readiness check, as the DOMA TPC smoke test uses them.

An endpoint on a token issuer is checked with tokens of that issuer, each scoped to the check's
own folder: its upload, stat, checksum, download, copies and deletes with one that may read,
create and modify there; a read with a read-only one, which must pass; a write with the read-only
one, and a write with a token for another path, which the door must refuse. A door that lets
either through accepts tokens it should not: the step fails, a finding, not a pass.
"""

from __future__ import annotations

import dataclasses
from urllib.parse import unquote, urlsplit

from campaigns.models import Endpoint
from campaigns.models.token_issuers import scopes
from campaigns.runs.engines.copies import EndpointCredentials
from campaigns.runs.storage import endpoint_credentials
from campaigns.runs.tokens import READ, WRITE, TokenError, request_token

#: The folder a token "for another path" names: beside the check's own, never one it may write.
ELSEWHERE = "-elsewhere"


def folder_path(folder_url: str) -> str:
    return unquote(urlsplit(folder_url).path).rstrip("/") or "/"


def check_scope(endpoint: Endpoint, folder_url: str) -> str:
    """What the check's ordinary steps present: read, create and modify on its folder."""
    return scopes(endpoint.token_issuer, {folder_path(folder_url): WRITE})


def read_only_scope(endpoint: Endpoint, folder_url: str) -> str:
    return scopes(endpoint.token_issuer, {folder_path(folder_url): READ})


def elsewhere_scope(endpoint: Endpoint, folder_url: str) -> str:
    return scopes(endpoint.token_issuer, {folder_path(folder_url) + ELSEWHERE: WRITE})


class CheckTokens:
    """The tokens of one check, asked once per endpoint and scope while it runs (a check lasts
    minutes at most; a token of the issuer's lifetime outlives it)."""

    def __init__(self, endpoints: list[Endpoint]) -> None:
        self.endpoints = {ep.name: ep for ep in endpoints if ep.token_issuer_id}
        self._tokens: dict[tuple[str, str], str] = {}

    def token(self, name: str, scope: str) -> str:
        key = (name, scope)
        if key not in self._tokens:
            self._tokens[key] = request_token(self.endpoints[name].token_issuer, scope).value
        return self._tokens[key]

    def credentials(self, name: str, base: EndpointCredentials, scope: str) -> EndpointCredentials:
        """`base` presenting a token of `scope` where the endpoint is on an issuer (TokenError
        when the issuer gives none)."""
        if name not in self.endpoints:
            return base
        return dataclasses.replace(base, bearer_token=self.token(name, scope))


def check_credentials(
    endpoints: list[Endpoint], folders: dict[str, str], tokens: CheckTokens
) -> dict[str, EndpointCredentials]:
    """Each endpoint's credentials by name, those on an issuer with a token for the check's
    folder on it (`folders`, by name); an issuer that gives none leaves the endpoint without a
    token, and the door's refusal of the steps says so."""
    out = {}
    for endpoint, base in zip(endpoints, endpoint_credentials(endpoints), strict=True):
        scope = check_scope(endpoint, folders[endpoint.name]) if endpoint.token_issuer_id else ""
        try:
            out[endpoint.name] = tokens.credentials(endpoint.name, base, scope)
        except TokenError:
            out[endpoint.name] = base
    return out

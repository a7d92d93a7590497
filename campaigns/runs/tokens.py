"""Run-scoped storage tokens: asked of each endpoint's issuer before a run, renewed while it lives.

An endpoint on a token issuer (Endpoint.token_issuer) gets, per run, one token whose scopes are
the narrowest its part in the run needs (the WLCG JWT profile):

* where the run reads: ``storage.read`` on the source folder (the generated sources' own folder
  when StorageOps writes them, with ``storage.create`` and ``storage.modify`` there to write and
  clean them up; the listed folder or the listed files' folders for existing data);
* where the run writes: ``storage.read``, ``storage.create`` and ``storage.modify`` on the run's
  own folder ``<destination path>/run-<id>`` and nothing else. Read is there because a door's
  SciTokens plugin (XRootD 5.5) answers a stat only with ``storage.read``, and gfal2 stats what
  it is about to overwrite and checksums what it wrote.

Renewal rule: a token is asked again once less than a third of its lifetime is left (its
``expires_in`` as the issuer said, not a setting of ours), by a thread of the run's driver; a
failed renewal is tried again every RETRY_SECONDS until the token expires. Copies read the
current token per copy (gfal2 contexts are given the new one before their next call).

Tokens live in this process's memory only: never in a record, an event, a log line or the API
(the errors here name the issuer and its answer, never a token).
"""

from __future__ import annotations

import logging
import posixpath
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

import requests

from campaigns.choices import CampaignKind
from campaigns.models import Endpoint, TokenIssuer
from campaigns.models.token_issuers import scopes
from campaigns.runs.planning import run_folder, sources_folder
from campaigns.runs.storage import Storage
from campaigns.spec import RunSpec

log = logging.getLogger(__name__)

#: Renew once less than this share of a token's lifetime is left.
RENEW_WHEN_LEFT = 1 / 3
#: Seconds between tries of a renewal that failed (the old token still holds meanwhile).
RETRY_SECONDS = 5.0
READ = ("read",)
WRITE = ("read", "create", "modify")
WRITE_NEW = ("create", "modify")


class TokenError(RuntimeError):
    """An issuer gave no token; the message names the issuer and its answer, never a secret."""


@dataclass(frozen=True)
class TokenNeed:
    """What one endpoint of a run asks its issuer for."""

    endpoint_id: int
    url: str  # the endpoint's URL prefix: gfal2 sends the token to URLs below it
    issuer_id: int
    scope: str


@dataclass(frozen=True)
class Token:
    value: str
    issued: float  # monotonic seconds
    lifetime: float  # seconds, as the issuer said

    @property
    def renew_at(self) -> float:
        return self.issued + self.lifetime * (1 - RENEW_WHEN_LEFT)

    @property
    def expires_at(self) -> float:
        return self.issued + self.lifetime

    def __repr__(self) -> str:  # never the token itself
        return f"<Token lifetime={self.lifetime:.0f}s>"


def _endpoint_path(endpoint: dict, folder: str) -> str:
    base = unquote(urlsplit(endpoint["url"]).path) or "/"
    return posixpath.join(base, folder.strip("/")) if folder.strip("/") else base


def _listed_folders(spec: RunSpec, endpoint: dict) -> list[str]:
    """The folders of a run's listed source URLs that lie below `endpoint`."""
    prefix = endpoint["url"]
    urls = [line.strip() for line in spec.source_urls.splitlines() if line.strip().startswith(prefix)]
    return sorted({posixpath.dirname(unquote(urlsplit(url).path)) for url in urls})


def grants(snapshot: dict, run_id: int) -> dict[int, dict[str, tuple[str, ...]]]:
    """Per endpoint id, the storage paths the run works on and the WLCG verbs it needs there."""
    spec = RunSpec.from_snapshot(snapshot)
    seed = spec.retry.seed if spec.retry else run_id
    sources, destinations = snapshot["sources"], snapshot["destinations"]
    if spec.kind == CampaignKind.CHECKSUM_LOAD:
        readers, writers = sources, []
    elif spec.direction in ("reverse", "both"):
        both = [*sources, *destinations]
        readers, writers = (destinations, sources) if spec.direction == "reverse" else (both, both)
    else:
        readers, writers = sources, destinations
    out: dict[int, dict[str, tuple[str, ...]]] = {}

    def add(endpoint: dict, path: str, verbs: tuple[str, ...]) -> None:
        paths = out.setdefault(endpoint["id"], {})
        paths[path] = tuple(sorted({*paths.get(path, ()), *verbs}))

    for endpoint in readers:
        if spec.source_listing == "urls":
            for folder in _listed_folders(spec, endpoint):
                add(endpoint, folder, READ)
        elif spec.source_listing:
            add(endpoint, _endpoint_path(endpoint, spec.source_path), READ)
        else:
            folder = _endpoint_path(endpoint, sources_folder(spec, seed))
            add(endpoint, folder, WRITE if spec.create_sources else READ)
    for endpoint in writers:
        add(endpoint, _endpoint_path(endpoint, run_folder(spec, run_id)), WRITE)
    return out


def needs(snapshot: dict, run_id: int) -> list[TokenNeed]:
    """The tokens a run asks for: one per endpoint on an issuer, with its scopes."""
    wanted = grants(snapshot, run_id)
    endpoints = Endpoint.objects.filter(pk__in=wanted, token_issuer__isnull=False).select_related("token_issuer")
    return [
        TokenNeed(ep.pk, ep.url, ep.token_issuer_id, scopes(ep.token_issuer, wanted[ep.pk]))
        for ep in sorted(endpoints, key=lambda ep: ep.pk)
    ]


def request_token(issuer: TokenIssuer, scope: str, clock: Callable[[], float] = time.monotonic) -> Token:
    """One token from `issuer` by the client_credentials grant (RFC 6749 4.4)."""
    try:
        answer = requests.post(
            issuer.token_endpoint,
            data={"grant_type": "client_credentials", "scope": scope, "audience": issuer.effective_audience},
            auth=(issuer.client_id, issuer.client_secret),
            timeout=issuer.timeout,
            verify=issuer.ca_file or True,
            allow_redirects=False,
        )
    except requests.RequestException as exc:
        raise TokenError(f"token issuer {issuer.name} did not answer: {type(exc).__name__}") from None
    try:
        body = answer.json()
    except ValueError:
        body = {}
    if answer.status_code != 200 or not isinstance(body, dict) or not body.get("access_token"):
        why = body.get("error_description") or body.get("error") if isinstance(body, dict) else ""
        raise TokenError(f"token issuer {issuer.name} refused a token for '{scope}': HTTP {answer.status_code}"
                         + (f" ({str(why)[:200]})" if why else ""))  # fmt: skip
    try:
        lifetime = float(body.get("expires_in", 0))
    except (TypeError, ValueError):
        lifetime = 0.0
    if lifetime <= 0:
        raise TokenError(f"token issuer {issuer.name} gave a token without a lifetime (expires_in)")
    return Token(str(body["access_token"]), clock(), lifetime)


class RunTokens:
    """The tokens of one run's driver, renewed by a thread of its own until close()."""

    def __init__(
        self,
        needs: Iterable[TokenNeed],
        fetch: Callable[[TokenIssuer, str], Token] = request_token,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.needs = list(needs)
        self._fetch = fetch
        self._clock = clock
        self._issuers = {issuer.pk: issuer for issuer in TokenIssuer.objects.filter(
            pk__in={need.issuer_id for need in self.needs})}  # fmt: skip
        self._tokens: dict[int, Token] = {}
        self._retry_at: dict[int, float] = {}  # endpoint id -> when a failed renewal is tried again
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.generation = 0  # bumped by every new token: copiers compare it with what they set
        self.renewals = 0
        self.failed_renewals = 0

    def __bool__(self) -> bool:
        return bool(self.needs)

    def start(self, keepalive: Callable[[], object] = lambda: None) -> RunTokens:
        """Ask every token now (TokenError if one is refused) and start renewing them;
        `keepalive` is called between two requests (the run's lease: an issuer may be slow)."""
        for need in self.needs:
            self._store(need, self._fetch(self._issuers[need.issuer_id], need.scope))
            keepalive()
        if self.needs:
            self._thread = threading.Thread(target=self._renew_loop, name="run-tokens", daemon=True)
            self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._lock:
            self._tokens.clear()

    def current(self) -> list[tuple[str, str]]:
        """(endpoint URL prefix, token) of every endpoint, as they are now."""
        with self._lock:
            return [(need.url, self._tokens[need.endpoint_id].value) for need in self.needs
                    if need.endpoint_id in self._tokens]  # fmt: skip

    def token_for(self, url: str) -> str:
        """The current token of the endpoint `url` lies below ("" when none is on an issuer)."""
        with self._lock:
            owners = [need for need in self.needs if url.startswith(need.url) and need.endpoint_id in self._tokens]
            if not owners:
                return ""
            return self._tokens[max(owners, key=lambda need: len(need.url)).endpoint_id].value

    def _store(self, need: TokenNeed, token: Token) -> None:
        with self._lock:
            self._tokens[need.endpoint_id] = token
            self._retry_at.pop(need.endpoint_id, None)
            self.generation += 1

    def _due_at(self, endpoint_id: int) -> float:
        return max(self._tokens[endpoint_id].renew_at, self._retry_at.get(endpoint_id, 0.0))

    def next_renewal(self) -> float:
        with self._lock:
            return min((self._due_at(pk) for pk in self._tokens), default=self._clock() + 60)

    def renew_due(self) -> None:
        """Renew every token past its renewal time (the loop's one step; tests call it too)."""
        now = self._clock()
        with self._lock:
            due = [need for need in self.needs if self._due_at(need.endpoint_id) <= now]
        for need in due:
            issuer = self._issuers[need.issuer_id]
            try:
                token = self._fetch(issuer, need.scope)
            except TokenError as exc:
                self.failed_renewals += 1
                self._retry_at[need.endpoint_id] = now + RETRY_SECONDS
                left = self._tokens[need.endpoint_id].expires_at - now
                log.warning("renewing the token of endpoint #%s failed (%.0f s left): %s", need.endpoint_id, left, exc)
                continue
            self._store(need, token)
            self.renewals += 1

    def _renew_loop(self) -> None:
        while not self._stop.is_set():
            wait = self.next_renewal() - self._clock()
            if self._stop.wait(max(wait, 0.05)):
                return
            try:
                self.renew_due()
            except Exception:  # a bug here must not end renewals of a live run silently
                log.exception("token renewal failed")
                self._stop.wait(RETRY_SECONDS)


def for_run(snapshot: dict, run_id: int, keepalive: Callable[[], object] = lambda: None) -> RunTokens:
    """The started tokens of a run (empty, and nothing started, when no endpoint is on an issuer)."""
    tokens = RunTokens(needs(snapshot, run_id))
    return tokens.start(keepalive) if tokens else tokens


@contextmanager
def lent_to(copier: Storage, snapshot: dict, run_id: int) -> Iterator[Storage]:
    """`copier` sending the run's tokens while the block runs (a clean-up asked for after the run)."""
    tokens = for_run(snapshot, run_id)
    try:
        if tokens:
            copier.use_tokens(tokens)
        yield copier
    finally:
        tokens.close()

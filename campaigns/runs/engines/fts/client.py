"""The FTS3 engine's client: bulk submission, batch polling, cancel and link limits over REST.

Plain HTTP with requests (not the `fts3` client library): it gives full control of every job
parameter and of the credentials (X.509 certificate/proxy or an OIDC bearer token, a CA path,
verification on by default), and needs nothing beyond what the worker already has.
Secrets stay in the session: they are never logged nor put into a result.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import quote, urlsplit

import requests

from campaigns.runs.engines.copies import CopyJob
from campaigns.runs.engines.fts.errors import categorize_fts

log = logging.getLogger(__name__)

# Job states after which FTS changes nothing (FINISHEDDIRTY: some files failed).
FINAL_JOB_STATES = frozenset({"FINISHED", "FAILED", "FINISHEDDIRTY", "CANCELED"})
FINAL_FILE_STATES = frozenset({"FINISHED", "FAILED", "CANCELED"})
# What a status poll asks FTS for about each file: only what the record needs.
FILE_FIELDS = (
    "file_id",
    "file_state",
    "reason",
    "filesize",
    "tx_duration",
    "throughput",
    "start_time",
    "finish_time",
    "transfer_host",
    "checksum",
    "file_metadata",
    "source_surl",
    "dest_surl",
)
POLL_BATCH = 50  # job ids per GET /jobs/ID1,ID2,…: keeps the URL well under common limits


class FtsError(Exception):
    """FTS answered with an error (its message kept), or could not be reached."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"FTS {status}: {message}" if status else f"FTS unreachable: {message}")
        self.status = status
        self.message = message


@dataclass(frozen=True)
class FtsSettings:
    """How to reach one FTS instance; built from an FtsInstance row at run time."""

    url: str
    x509_cert: str = ""
    x509_key: str = ""
    bearer_token: str = ""
    ca_path: str = ""
    verify_tls: bool = True
    timeout: float = 30.0

    @classmethod
    def from_instance(cls, instance) -> FtsSettings:
        return cls(
            url=instance.url,
            x509_cert=instance.x509_cert,
            x509_key=instance.x509_key,
            bearer_token=instance.bearer_token,
            ca_path=instance.ca_path,
            verify_tls=instance.verify_tls,
        )

    def __repr__(self) -> str:  # never print the token
        auth = "token" if self.bearer_token else "x509" if self.x509_cert else "none"
        return f"FtsSettings(url={self.url!r}, auth={auth})"


def storage_element(url: str) -> str:
    """FTS's name of a storage element: scheme and host, the port dropped (`root://door1`)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}"


def parse_time(value: str | None) -> datetime | None:
    """FTS times are ISO 8601 in UTC without a zone ("2026-11-23T02:14:05")."""
    if not value:
        return None
    parsed = datetime.fromisoformat(value)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


# -- submission -------------------------------------------------------------------------------
@dataclass(frozen=True)
class JobOptions:
    """The campaign's knobs as FTS job parameters."""

    verify_checksum: str = "both"
    checksum_algorithm: str = "adler32"
    overwrite: bool = True
    retry: int = 0
    priority: int = 3
    timeout: int = 3600
    nostreams: int = 1
    buffer_size: int = 0
    strict_copy: bool = False

    @classmethod
    def from_spec(cls, spec, fts) -> JobOptions:
        """The FTS knobs of a RunSpec and of the run's FTS options (fts.options.FtsOptions)."""
        return cls(
            verify_checksum=spec.checksum_mode,
            checksum_algorithm=spec.checksum_algorithm,
            overwrite=spec.overwrite,
            retry=spec.retries,
            priority=fts.priority,
            timeout=spec.timeout,
            nostreams=spec.streams,
            buffer_size=spec.tcp_buffer_size,
            strict_copy=fts.strict_copy,
        )


def job_body(
    files: Sequence[CopyJob], options: JobOptions, metadata: dict, token_for: Callable[[str], str] | None = None
) -> dict:
    """One bulk job: a file entry per transfer, its metadata naming campaign, run, step and
    transfer so every file FTS reports can be matched to its record without guessing.

    `token_for(url)` gives the run's storage token of a URL's endpoint (campaigns.runs.tokens):
    FTS's token submission fields, per file, as FTS 3.13+ takes them, marked unmanaged (StorageOps
    renews them for the jobs it submits later; FTS does not exchange or refresh them)."""
    entries = []
    tokened = False
    for job in files:
        entry = {
            "sources": [job.source],
            "destinations": [job.destination],
            "filesize": job.size,
            "metadata": {**metadata, "step": job.step, "transfer": job.id, "index": job.index},
        }
        for field, url in (("source_tokens", job.source), ("destination_tokens", job.destination)):
            if token := (token_for(url) if token_for else ""):
                entry[field] = [token]
                tokened = True
        if job.checksum and options.verify_checksum != "none":
            # The generated data's known checksum: FTS checks the side(s) verify_checksum says.
            entry["checksum"] = f"{options.checksum_algorithm}:{job.checksum}"
        entries.append(entry)
    params = {
        "verify_checksum": options.verify_checksum,
        "overwrite": options.overwrite,
        # Explicit: FTS's server-side default retry would otherwise apply.
        "retry": options.retry,
        "retry_delay": 0,
        "priority": options.priority,
        "timeout": options.timeout,
        "nostreams": options.nostreams,
        "strict_copy": options.strict_copy,
        "job_metadata": metadata,
    }
    if options.buffer_size:
        params["buffer_size"] = options.buffer_size
    if tokened:
        params["unmanaged_tokens"] = True
    return {"files": entries, "params": params}


# -- outcomes -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class FileOutcome:
    """One file's final state as FTS reported it."""

    transfer_id: int | None
    file_id: int | None
    state: str
    reason: str
    filesize: int
    tx_duration: float | None  # None: FTS never started the file
    start_time: datetime | None
    finish_time: datetime | None
    transfer_host: str
    checksum: str
    category: str
    code: int | None
    source: str
    destination: str

    @property
    def ok(self) -> bool:
        return self.state == "FINISHED"

    @property
    def throughput_bps(self) -> float | None:
        # Bytes really moved over time really spent, from FTS's own filesize and tx_duration.
        if not self.ok or not self.tx_duration:
            return None
        return self.filesize / self.tx_duration


def file_outcome(entry: dict) -> FileOutcome:
    state = entry.get("file_state") or ""
    reason = entry.get("reason") or ""
    category, code = ("", None)
    if state in ("FAILED", "CANCELED"):
        category, code = categorize_fts(reason or ("Transfer canceled" if state == "CANCELED" else ""))
    start_time = parse_time(entry.get("start_time"))
    tx_duration = entry.get("tx_duration")
    metadata = entry.get("file_metadata") or {}
    if isinstance(metadata, str):  # FTS may hand metadata back as the JSON text it stored
        try:
            metadata = json.loads(metadata)
        except ValueError:
            metadata = {}
    transfer = metadata.get("transfer") if isinstance(metadata, dict) else None
    return FileOutcome(
        transfer_id=int(transfer) if transfer is not None else None,
        file_id=entry.get("file_id"),
        state=state,
        reason=reason,
        filesize=int(entry.get("filesize") or 0),
        # A file FTS never started has no duration (FTS says null), not 0.
        tx_duration=float(tx_duration) if tx_duration is not None and start_time is not None else None,
        start_time=start_time,
        finish_time=parse_time(entry.get("finish_time")),
        transfer_host=entry.get("transfer_host") or "",
        checksum=entry.get("checksum") or "",
        category=category,
        code=code,
        source=entry.get("source_surl") or "",
        destination=entry.get("dest_surl") or "",
    )


def active_starts(files: list[dict]) -> tuple[dict[int, float], set[int]]:
    """From a job's file list: {transfer id: FTS's start time (epoch)} of the files FTS is
    copying, and the ids of the files it is not (queued, or final)."""
    started: dict[int, float] = {}
    other: set[int] = set()
    for entry in files:
        outcome = file_outcome(entry)
        if outcome.transfer_id is None:
            continue
        if outcome.state == "ACTIVE" and outcome.start_time is not None:
            started[outcome.transfer_id] = outcome.start_time.timestamp()
        else:
            other.add(outcome.transfer_id)
    return started, other


# -- the client -------------------------------------------------------------------------------
class FtsClient:
    def __init__(self, settings: FtsSettings) -> None:
        self.base = settings.url.rstrip("/")
        self.timeout = settings.timeout
        session = requests.Session()
        session.headers["Accept"] = "application/json"
        if settings.bearer_token:
            session.headers["Authorization"] = f"Bearer {settings.bearer_token}"
        if settings.x509_cert:
            # A proxy holds certificate and key in one file.
            session.cert = (settings.x509_cert, settings.x509_key or settings.x509_cert)
        # Passed with every request: a session-wide `verify` would lose to REQUESTS_CA_BUNDLE.
        self.verify: bool | str = (settings.ca_path or True) if settings.verify_tls else False
        self.session = session

    def _call(self, method: str, path: str, *, ok: Iterable[int] = (200, 201, 202, 204, 207), **kwargs):
        try:
            response = self.session.request(
                method, self.base + path, timeout=self.timeout, verify=self.verify, **kwargs
            )
        except requests.RequestException as exc:
            raise FtsError(0, _describe(exc)) from None
        if response.status_code not in set(ok):
            raise FtsError(response.status_code, _error_message(response))
        if response.status_code == 204 or not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            raise FtsError(response.status_code, f"not JSON: {response.text[:200]}") from None

    # jobs
    def submit(self, body: dict) -> str:
        return self._call("POST", "/jobs", json=body)["job_id"]

    def jobs(self, job_ids: Sequence[str], file_fields: Sequence[str] = FILE_FIELDS) -> list[dict]:
        """Status of many jobs with their files' fields, POLL_BATCH ids per request."""
        result: list[dict] = []
        for start in range(0, len(job_ids), POLL_BATCH):
            ids = ",".join(job_ids[start : start + POLL_BATCH])
            # A single id comes back as an object; several as a list (207 if some failed).
            data = self._call("GET", f"/jobs/{ids}", params={"files": ",".join(file_fields)}, ok=(200, 207, 404))
            result.extend(data if isinstance(data, list) else [data])
        return result

    def cancel(self, job_ids: Sequence[str]) -> list[dict]:
        result: list[dict] = []
        for start in range(0, len(job_ids), POLL_BATCH):
            data = self._call("DELETE", "/jobs/" + ",".join(job_ids[start : start + POLL_BATCH]), ok=(200, 207, 404))
            result.extend(data if isinstance(data, list) else [data])
        return result

    # link configuration (needs the config role)
    def links(self) -> list[dict]:
        return self._call("GET", "/config/links") or []

    def set_link(self, config: dict) -> dict:
        return self._call("POST", "/config/links", json=config)

    def delete_link(self, symbolicname: str) -> None:
        self._call("DELETE", "/config/links/" + quote(symbolicname, safe=""))

    # what FTS says about itself, where the server offers it (fts-rest-flask 3.13 answers both;
    # a server without them answers 404)
    def audit(self) -> list[dict] | None:
        try:
            return self._call("GET", "/config/audit")
        except FtsError as exc:
            if exc.status in (404, 405, 501):
                return None
            raise

    def optimizer_evolution(self, source_se: str, dest_se: str) -> list[dict] | None:
        try:
            return self._call("GET", "/optimizer/evolution", params={"source_se": source_se, "dest_se": dest_se})
        except FtsError as exc:
            if exc.status in (404, 405, 501):
                return None
            raise


def _describe(exc: requests.RequestException) -> str:
    """A connection error in a line: requests' own text buries the cause in a retry report."""
    text = str(exc)
    tls = re.search(r"\[SSL: [A-Z_]+\][^'\")]*", text)
    if tls:
        return f"TLS: {tls.group(0).strip()}"
    refused = re.search(r"(Connection refused|Name or service not known|timed out)", text)
    return refused.group(1) if refused else text[:200]


def _error_message(response: requests.Response) -> str:
    """FTS's two error shapes: {"status", "message"} and {"http_status", "http_message"}."""
    try:
        data = response.json()
    except ValueError:
        return response.text[:300] or response.reason
    if isinstance(data, dict):
        message = data.get("message") or data.get("http_message") or ""
        if response.status_code == 419:
            message += " (delegate a proxy to this FTS first, e.g. fts-rest-delegate -s URL, or use a token)"
        return message or json.dumps(data)[:300]
    return json.dumps(data)[:300]

"""What every engine consumes and produces: copy jobs in, copy results out (the executor that
takes them is campaigns.runs.executors.base)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol


@dataclass(frozen=True)
class CopyOptions:
    """The campaign knobs that shape each copy, taken from the run's frozen snapshot."""

    tpc_mode: str = "auto"
    checksum_mode: str = "both"
    checksum_algorithm: str = "adler32"
    streams: int = 1
    tcp_buffer_size: int = 0
    timeout: int = 3600
    overwrite: bool = True
    create_parent: bool = True

    @classmethod
    def from_spec(cls, spec) -> CopyOptions:
        """The copy knobs of a RunSpec (duck-typed: engines sit below the spec's module)."""
        return cls(**{name: getattr(spec, name) for name in cls.__dataclass_fields__})

    def at(self, point) -> CopyOptions:
        """These options at a step's sweep point (its streams, TCP buffer and mode)."""
        return replace(self, streams=point.streams, tcp_buffer_size=point.tcp_buffer_size, tpc_mode=point.tpc_mode)


@dataclass(frozen=True)
class EndpointCredentials:
    """Per-endpoint secrets; never logged, never put in a result."""

    url: str
    bearer_token: str = ""
    x509_proxy: str = ""
    ca_dir: str = ""


class TokenSource(Protocol):
    """A run's storage tokens, which change while it lives (campaigns.runs.tokens.RunTokens)."""

    generation: int  # changes with every new token

    def current(self) -> list[tuple[str, str]]:
        """(endpoint URL prefix, token) of every endpoint on an issuer."""

    def token_for(self, url: str) -> str:
        """The token of the endpoint `url` lies below, or ""."""


@dataclass(slots=True)
class CopyJob:
    id: int
    index: int
    source: str
    destination: str
    size: int
    step: int
    attempt: int
    checksum: str = ""  # the source data's known checksum, when StorageOps generated it
    # The knobs of its step's sweep point, where they differ from the run's (campaigns.sweeps).
    options: CopyOptions | None = None


@dataclass(slots=True)
class CopyResult:
    job: CopyJob
    ok: bool
    started: float  # epoch seconds
    # Read from the clock when the copy ended (not started + duration): a copy thread's next
    # copy then never seems to begin before its last one ended, which would count two in flight.
    finished: float
    duration: float  # monotonic seconds, immune to clock steps
    code: int | None = None
    message: str = ""
    category: str = ""
    source_checksum: str = ""
    destination_checksum: str = ""
    copy_mode: str = ""
    host: str = ""  # the client host that ran it, in a client pool (empty: the driving worker)

    @property
    def bytes(self) -> int:
        return self.job.size if self.ok else 0

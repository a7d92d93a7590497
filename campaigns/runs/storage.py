"""The site's storage as everything around a copy sees it: one interface, one library behind it.

Sources, clean-up, readiness, the run's versions and the pool clients stat, list, write, delete
and checksum through a `Storage`; which library speaks to the doors (gfal2 today, the only one
that covers root://, davs:// and file:// alike) registers itself here when its engine's app is
ready (campaigns.runs.engines.gfal2.apps), so that library is imported by its own package only.
Engines copy with what they like; what they leave on the storage is checked through this.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol

from campaigns.models import Endpoint
from campaigns.runs.engines.copies import CopyJob, CopyOptions, CopyResult, EndpointCredentials, TokenSource


class Storage(Protocol):
    """What a run asks of the doors besides its copies. Failures raise OSError with the
    library's errno and words; every call keeps StorageOps' own deadline (DeadlineExceeded)."""

    def size_of(self, url: str) -> int: ...

    def checksum_of(self, url: str, algorithm: str) -> str: ...

    def list_files(self, url: str) -> list[tuple[str, int]]: ...

    def remove(self, url: str) -> None: ...

    def remove_folder(self, url: str) -> None: ...

    def write(self, url: str, chunks: Iterable[bytes], size: int) -> None: ...

    def upload(self, local_path: str, url: str) -> None: ...

    def copy(self, job: CopyJob) -> CopyResult: ...

    def cancel_all(self) -> int: ...

    def use_tokens(self, tokens: TokenSource) -> None: ...


#: A storage for these options and these endpoints' secrets (readiness checks, probes' removal).
StorageFactory = Callable[[CopyOptions, list[EndpointCredentials]], Storage]


@dataclass(frozen=True)
class Library:
    name: str
    #: A storage with these options and secrets.
    open: StorageFactory
    #: A run's storage: its options from the snapshot, its endpoints' secrets from the database.
    for_run: Callable[[dict], Storage]
    #: {name: version} of the library and its plug-ins, frozen on every run.
    versions: Callable[[], dict[str, str]]


_library: Library | None = None


def register(library: Library) -> Library:
    global _library
    _library = library
    return library


def library() -> Library:
    if _library is None:
        raise RuntimeError("no storage library registered: the campaigns app is not ready")
    return _library


def for_run(snapshot: dict) -> Storage:
    """The run's storage; secrets are read from the database now, never from the snapshot."""
    return library().for_run(snapshot)


def open_storage(options: CopyOptions, credentials: list[EndpointCredentials]) -> Storage:
    return library().open(options, credentials)


def versions() -> dict[str, str]:
    return library().versions()


def endpoint_credentials(endpoints: Iterable[Endpoint]) -> list[EndpointCredentials]:
    """The secrets a storage needs per endpoint, read from the database (never from a snapshot)."""
    return [
        EndpointCredentials(url=ep.url, bearer_token=ep.bearer_token, x509_proxy=ep.x509_proxy, ca_dir=ep.ca_dir)
        for ep in endpoints
    ]


def run_credentials(snapshot: dict) -> Iterator[EndpointCredentials]:
    """The secrets of every endpoint the run's snapshot names."""
    ids = {ep["id"] for ep in [*snapshot["sources"], *snapshot["destinations"]]}
    yield from endpoint_credentials(Endpoint.objects.filter(pk__in=ids))

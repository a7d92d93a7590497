"""Whether a file FTS reports CANCELED after starting it is whole on its destination anyway.

FTS's cancel marks the files CANCELED at once but kills their copy processes only seconds later
(a real FTS 3.14.4: cancel sent 00:28:48, a copy "finished successfully" 00:28:49, processes
killed 00:28:52): a copy that ends in between is written whole and still reported CANCELED.
StorageOps checks the destination itself, through gfal2, the way clean-up proves a file: the
size, then the checksum against the generated data's or, for data it did not create, the
source's. When it was found whole bounds when the copy ended (FTS's finish time is its kill,
seconds later): the executor looks while FTS has not yet given the finish time. A file's
modification time is no such bound: an XRootD door has the whole file written a second into a
throttled TPC that ends seconds later. Under a deadline: a door that does not answer leaves the
question open (None), it does not hold up the run's end.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import NamedTuple

CHECK_SECONDS = 30.0


class Found(NamedTuple):
    """What the destination holds of one copy: `whole` (True: the size and checksum expected;
    False: not, or no file; None: the storage could not say), the checksum read there (when
    whole) and when it was found so (epoch seconds: the earliest check that found it whole)."""

    whole: bool | None
    checksum: str = ""
    checked_at: float | None = None


def whole(storage, destination: str, size: int, checksum: str, source: str, algorithm: str) -> bool | None:
    """True: the destination has `size` bytes with the expected checksum; False: it has not (or
    no file); None: the storage could not say."""
    return examine(storage, destination, size, checksum, source, algorithm).whole


def examine(storage, destination: str, size: int, checksum: str, source: str, algorithm: str) -> Found:
    """The destination of one copy, as Found."""
    try:
        found = storage.size_of(destination)
    except OSError as exc:
        return Found(False if exc.errno == 2 else None, checked_at=time.time())
    if found != size:
        return Found(False, checked_at=time.time())
    try:
        expected = checksum or storage.checksum_of(source, algorithm)
        there = storage.checksum_of(destination, algorithm)
    except OSError:
        return Found(None, checked_at=time.time())
    checked_at = time.time()
    if there.lstrip("0") != expected.lower().lstrip("0"):
        return Found(False, checked_at=checked_at)
    return Found(True, there.lower(), checked_at)


def examine_all(
    storage, copies: Sequence[tuple[int, str, int, str, str]], algorithm: str, seconds: float = CHECK_SECONDS
) -> dict[int, Found]:
    """transfer id -> Found for each (id, destination, size, checksum, source) in `copies`, as
    far as `seconds` allow; a copy not checked by then is Found(None)."""
    found: dict[int, Found] = {}

    def check() -> None:
        for pk, destination, size, checksum, source in copies:
            found[pk] = examine(storage, destination, size, checksum, source, algorithm)

    worker = threading.Thread(target=check, name="fts-cancel-check", daemon=True)
    worker.start()
    worker.join(seconds)  # a check still running is left to end alone: its answer is dropped
    return {pk: found.get(pk) or Found(None) for pk, *_ in copies}


def complete_on_destination(
    storage, copies: Sequence[tuple[int, str, int, str, str]], algorithm: str, seconds: float = CHECK_SECONDS
) -> dict[int, bool | None]:
    """transfer id -> whole(...) for each (id, destination, size, checksum, source) in `copies`,
    as far as `seconds` allow; a copy not checked by then is None."""
    return {pk: f.whole for pk, f in examine_all(storage, copies, algorithm, seconds).items()}

"""Whether a file FTS reports CANCELED after starting it is whole on its destination anyway.

FTS's cancel signals the copy's process; a copy that ends in that moment is written whole and
still reported CANCELED (FTS's own race, seen on a real instance: two files recorded cancelled
were complete on the destination). StorageOps mirrors what FTS said and checks the destination
itself, through gfal2, the way clean-up proves a file: the size, then the checksum against the
generated data's or, for data it did not create, the source's. Under a deadline: a door that
does not answer leaves the question open (None), it does not hold up the run's end.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

CHECK_SECONDS = 30.0


def whole(storage, destination: str, size: int, checksum: str, source: str, algorithm: str) -> bool | None:
    """True: the destination has `size` bytes with the expected checksum; False: it has not (or
    no file); None: the storage could not say."""
    try:
        found = storage.size_of(destination)
    except OSError as exc:
        return False if exc.errno == 2 else None
    if found != size:
        return False
    try:
        expected = checksum or storage.checksum_of(source, algorithm)
        return storage.checksum_of(destination, algorithm).lstrip("0") == expected.lower().lstrip("0")
    except OSError:
        return None


def complete_on_destination(
    storage, copies: Sequence[tuple[int, str, int, str, str]], algorithm: str, seconds: float = CHECK_SECONDS
) -> dict[int, bool | None]:
    """transfer id -> whole(...) for each (id, destination, size, checksum, source) in `copies`,
    as far as `seconds` allow; a copy not checked by then is None."""
    found: dict[int, bool | None] = {}

    def check() -> None:
        for pk, destination, size, checksum, source in copies:
            found[pk] = whole(storage, destination, size, checksum, source, algorithm)

    worker = threading.Thread(target=check, name="fts-cancel-check", daemon=True)
    worker.start()
    worker.join(seconds)  # a check still running is left to end alone: its answer is dropped
    return {pk: found.get(pk) for pk, *_ in copies}

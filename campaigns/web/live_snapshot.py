"""One computation of a live run's view per moment, shared by every viewer in every web process.

Hundreds of people may watch one live run; each page polls the progress partial every 2 s and
the chart documents every 5 s, and all of them read the same thing (nothing in them depends on
the viewer: the role is checked per request by storageops.access before a view runs). A view is
computed once per key -- the caller's key names the run, the part and the moment (the clock's
second, and for the progress partial the run's own figures) -- kept in the "shared" cache
(Redis), and answered to every viewer of that moment from there.

When many viewers ask at the turn of a second, one of them computes (it takes a short lock in
Redis) and the others are answered the part's previous moment meanwhile (a second older), or,
when there is none yet, wait for the result instead of all computing the same thing at once: the
web threads are not all held waiting on one computation every second. A computation that died
frees the lock after LOCK_SECONDS, and a viewer that waited WAIT_SECONDS computes for itself.
Each process also keeps the last moments it read in its own memory, so most asks cost neither
Redis nor the database.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

from django.core.cache import caches

T = TypeVar("T")

KEEP_SECONDS = 5  # a moment outlives its second a little: asks that read the clock just before it turned
LOCK_SECONDS = 5
WAIT_SECONDS = 2.0
POLL_SECONDS = 0.01
LOCAL_KEYS = 256  # the process's memory: a few parts of a few runs for a few seconds

_local: dict[str, tuple[float, object]] = {}
_local_lock = threading.Lock()


def tick(now: float | None = None) -> int:
    """The moment live figures are shared for: the clock's second (they change at most once a second)."""
    return int(now if now is not None else time.time())


def once(part: str, moment: object, compute: Callable[[], T], *, previous_meanwhile: bool = True) -> T:
    """The value of `part` (a run's view) at `moment`, computed once for every viewer who asks
    for it while it is kept; while another viewer computes it, the part's previous moment, or,
    with `previous_meanwhile` False (a reader must see a change it made), the new one waited for."""
    key = f"{part}:{moment}"
    held = _from_process(key)
    if held is not None:
        return held[0]
    store = caches["shared"]
    boxed = store.get(key)  # boxed: a computed None (no such run) is kept too
    if boxed is None and store.add(f"{key}:computing", 1, LOCK_SECONDS):
        try:
            boxed = (compute(),)
            store.set_many({key: boxed, f"{part}:latest": boxed}, KEEP_SECONDS)
        finally:
            store.delete(f"{key}:computing")
    elif boxed is None:
        previous = store.get(f"{part}:latest") if previous_meanwhile else None
        if previous is not None:
            return previous[0]  # not kept in the process: the next ask reads the new moment
        boxed = _wait_for(store, key) or (compute(),)
    _keep_in_process(key, boxed)
    return boxed[0]


def _wait_for(store, key: str) -> tuple | None:
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)
        boxed = store.get(key)
        if boxed is not None:
            return boxed
    return None


def _from_process(key: str) -> tuple | None:
    with _local_lock:
        kept = _local.get(key)
    if kept is None or kept[0] < time.monotonic():
        return None
    return kept[1]  # type: ignore[return-value]


def _keep_in_process(key: str, boxed: tuple) -> None:
    now = time.monotonic()
    with _local_lock:
        if len(_local) >= LOCAL_KEYS:
            for old in [k for k, (until, _) in _local.items() if until < now] or list(_local)[: LOCAL_KEYS // 2]:
                del _local[old]
        _local[key] = (now + KEEP_SECONDS, boxed)


def forget_process_memory() -> None:
    """For tests: the next ask reads the shared cache, as another process would."""
    with _local_lock:
        _local.clear()

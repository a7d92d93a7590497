"""StorageOps' own deadline on a gfal2 call, whatever the plugin does with its timeout.

gfal2 calls were seen to run for minutes past their own timeout (a closed port: XrdCl retries
its connection window for 229 s; a door that accepts and never answers) and checksum requests
on root:// cannot be interrupted at all. So the caller cancels the call's gfal2 contexts at the
deadline (or when asked to stop), and a call that still has not returned a little later is
given up: its thread is left to finish alone and its late answer is dropped.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

# How long a cancelled call may take to return before it is given up.
GIVE_UP = 5.0

T = TypeVar("T")


class Stopped(Exception):
    """A call stopped before it returned: at its deadline ("deadline") or when asked ("asked")."""

    def __init__(self, reason: str, seconds: float, error: BaseException | None = None, given_up: bool = False):
        self.reason, self.seconds, self.error, self.given_up = reason, seconds, error, given_up
        super().__init__(reason)


def in_background(call: Callable[..., object], *args: object) -> None:
    """gfal2's context.cancel() was seen to block for as long as the call it cancels (a door
    that accepts and never answers): it must never hold up the thread that keeps the deadline."""
    threading.Thread(target=call, args=args, name="cancel", daemon=True).start()


def call_with_deadline(
    copier,
    call: Callable[[], T],
    deadline: float,
    *,
    tick: Callable[[], bool] | None = None,
    every: float = 1.0,
    give_up: float = GIVE_UP,
) -> T:
    """Run `call` (gfal2 work through `copier`) in a thread of its own and return its value.

    Every `every` seconds `tick()` is called from this thread (a lease renewed, a cancel looked
    for); True from it stops the call. At the deadline or a stop, the copier's contexts in flight
    are cancelled (copier.cancel_all); if the call has not returned `give_up` seconds later it is
    left behind. Raises Stopped then, or whatever `call` raised.
    """
    box: dict[str, object] = {}
    done = threading.Event()

    def target() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # noqa: BLE001 -- handed to the caller's thread as it was
            box["error"] = exc
        finally:
            done.set()

    started = time.monotonic()
    threading.Thread(target=target, name="gfal2-call", daemon=True).start()
    reason, stopped_at = "", 0.0
    while True:
        now = time.monotonic()
        wait = every if reason else min(every, max(started + deadline - now, 0.0))
        if done.wait(wait):
            break
        now = time.monotonic()
        asked = tick() if tick is not None else False
        if not reason and (asked or now - started >= deadline):
            reason, stopped_at = ("asked" if asked else "deadline"), now
            in_background(copier.cancel_all)
        elif reason and now - stopped_at >= give_up:
            raise Stopped(reason, now - started, given_up=True)
    if "error" in box:
        error = box["error"]
        if reason:
            raise Stopped(reason, time.monotonic() - started, error=error)  # type: ignore[arg-type]
        raise error  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]

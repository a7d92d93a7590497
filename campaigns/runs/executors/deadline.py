"""StorageOps' own deadline on a storage call (gfal2's, XRootD's), whatever the library does with its timeout.

gfal2 calls were seen to run for minutes past their own timeout (a closed port: XrdCl retries
its connection window for 229 s; a door that accepts and never answers held a stat for minutes)
and a checksum on root:// cannot be interrupted at all (see ``checksum.py``). So the call runs in
a thread of its own while the caller waits; at the deadline (or when asked to stop) its gfal2
contexts are cancelled, in the background since a cancel may block as long as the call it
cancels, and a call that has not returned ``GIVE_UP`` seconds later is given up, as the copy pool
gives up a copy: its thread is left to finish alone and its late answer is dropped.

Two faces of one rule: ``with_deadline`` for one call on one context around a run (preparation,
clean-up, a streamed write), raising ``DeadlineExceeded`` (an OSError, ETIMEDOUT);
``call_with_deadline`` for a readiness step, which also renews a lease and looks for a cancel
while it waits (``tick``), raising ``Stopped``.
"""

from __future__ import annotations

import errno
import threading
import time
from collections.abc import Callable
from typing import TypeVar

# How long a cancelled call may take to return before it is given up.
GIVE_UP = 5.0
#: A copy's deadline is the campaign's timeout and this much: gfal2 gets the first chance to
#: time out by itself (and say why); StorageOps cancels it a little later whatever it does.
DEADLINE_GRACE = 3.0

T = TypeVar("T")


class Stopped(Exception):
    """A call stopped before it returned: at its deadline ("deadline") or when asked ("asked")."""

    def __init__(self, reason: str, seconds: float, error: BaseException | None = None, given_up: bool = False):
        self.reason, self.seconds, self.error, self.given_up = reason, seconds, error, given_up
        super().__init__(reason)


class DeadlineExceeded(OSError):
    """A gfal2 call did not answer within StorageOps' deadline (errno ETIMEDOUT)."""

    def __init__(self, what: str, seconds: float, detail: str) -> None:
        super().__init__(errno.ETIMEDOUT, f"{what}: no answer within StorageOps' {seconds:g} s deadline; {detail}")


def in_background(call: Callable[..., object], *args: object) -> None:
    """gfal2's context.cancel() was seen to block for as long as the call it cancels (a door
    that accepts and never answers): it must never hold up the thread that keeps the deadline."""
    threading.Thread(target=call, args=args, name="cancel", daemon=True).start()


def run_with_deadline(
    call: Callable[[], T],
    deadline: float,
    cancel: Callable[[], object],
    *,
    tick: Callable[[], bool] | None = None,
    every: float = 1.0,
    give_up: float = GIVE_UP,
    name: str = "gfal2-call",
) -> T:
    """Run `call` in a thread of its own and return its value.

    Every `every` seconds `tick()` is called from this thread (a lease renewed, a cancel looked
    for); True from it stops the call. At the deadline or a stop, `cancel()` runs in the
    background; if the call has not returned `give_up` seconds later it is left behind. Raises
    Stopped once the call was stopped (whatever it then returned), or what `call` raised in time.
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
    threading.Thread(target=target, name=name[:60], daemon=True).start()
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
            in_background(cancel)
        elif reason and now - stopped_at >= give_up:
            raise Stopped(reason, now - started, given_up=True)
    error = box.get("error")
    if reason:
        raise Stopped(reason, time.monotonic() - started, error=error)  # type: ignore[arg-type]
    if error is not None:
        raise error  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]


def call_with_deadline(
    copier,
    call: Callable[[], T],
    deadline: float,
    *,
    tick: Callable[[], bool] | None = None,
    every: float = 1.0,
    give_up: float = GIVE_UP,
) -> T:
    """`call` (gfal2 work through `copier`) under `deadline`: at it, or when `tick()` says so,
    every context of the copier in flight is cancelled (copier.cancel_all). Raises Stopped."""
    return run_with_deadline(call, deadline, copier.cancel_all, tick=tick, every=every, give_up=give_up)


def with_deadline(ctx, call: Callable[[], T], seconds: float, what: str) -> T:
    """``call()`` (gfal2 calls on ``ctx``) within ``seconds``, else ``DeadlineExceeded``.

    What ``call`` raises in time is raised as it is; ``what`` names the call in the error
    ("stat root://door//data/f")."""
    try:
        return run_with_deadline(call, seconds, ctx.cancel, name=f"gfal2 {what}")
    except Stopped as stop:
        if stop.given_up:
            raise DeadlineExceeded(what, seconds, f"cancelled, and given up {GIVE_UP:g} s later") from None
        detail = f"cancelled ({stop.error})" if stop.error else "cancelled"
        raise DeadlineExceeded(what, seconds, detail) from None

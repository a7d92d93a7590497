"""A deadline on one gfal2 call that is not a copy run by the copy pool: a stat, a checksum, a
listing, a mkdir, an unlink around a run (its preparation, its clean-up, a streamed write).

gfal2's own timeouts do not bound these: a door that accepts and never answers held a stat for
minutes, and a checksum on root:// cannot be interrupted at all (see ``checksum.py``). So the
call runs in a thread of its own while the caller waits ``seconds``; at the deadline its context
is cancelled (in the background: a cancel may block as long as the call it cancels), and a call
that has not returned ``GIVE_UP`` seconds later is given up, as the copy pool gives up a copy:
its thread is left to finish alone and the caller gets ``DeadlineExceeded`` at once. A context
that was cancelled is not used again (``Gfal2Copier`` drops it).
"""

from __future__ import annotations

import errno
import threading
from collections.abc import Callable
from typing import TypeVar

from campaigns.runs.engines.gfal2.copy_threads import GIVE_UP, in_background

T = TypeVar("T")
#: A copy's deadline is the campaign's timeout and this much: gfal2 gets the first chance to
#: time out by itself (and say why); StorageOps cancels it a little later whatever it does.
DEADLINE_GRACE = 3.0


class DeadlineExceeded(OSError):
    """A gfal2 call did not answer within StorageOps' deadline (errno ETIMEDOUT)."""

    def __init__(self, what: str, seconds: float, detail: str) -> None:
        super().__init__(errno.ETIMEDOUT, f"{what}: no answer within StorageOps' {seconds:g} s deadline; {detail}")


def with_deadline(ctx, call: Callable[[], T], seconds: float, what: str) -> T:
    """``call()`` (gfal2 calls on ``ctx``) within ``seconds``, else ``DeadlineExceeded``.

    What ``call`` raises in time is raised as it is; ``what`` names the call in the error
    ("stat root://door//data/f")."""
    outcome: dict[str, object] = {}
    done = threading.Event()

    def run() -> None:
        try:
            outcome["value"] = call()
        except BaseException as exc:  # noqa: BLE001 -- handed to the caller's thread as it is
            outcome["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, name=f"gfal2 {what}"[:60], daemon=True).start()
    if not done.wait(seconds):
        in_background(ctx.cancel)
        if not done.wait(GIVE_UP):
            raise DeadlineExceeded(what, seconds, f"cancelled, and given up {GIVE_UP:g} s later")
        error = outcome.get("error")
        raise DeadlineExceeded(what, seconds, f"cancelled ({error})" if error else "cancelled")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]

"""A loop's failures logged once, not once a tick: the first with its traceback, then a line a
minute while they go on, then one when the loop works again.

A collector ticks every second while a run is live; through a 45-s database outage it wrote 45
tracebacks, two collectors 90, and an hour's soak 3,000, burying what else the log said.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

#: Seconds between the "still failing" lines of one stretch of failures.
REMIND_SECONDS = 60.0


class FailureLog:
    """What `what` (a loop's name, for the messages) says to `log` as its ticks fail and work."""

    def __init__(self, log: logging.Logger, what: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.log, self.what, self.clock = log, what, clock
        self.since: float | None = None  # when the current stretch of failures began
        self.failures = 0
        self.reminded = 0.0

    def failed(self, exc: BaseException) -> None:
        now = self.clock()
        self.failures += 1
        if self.since is None:
            self.since = self.reminded = now
            self.log.error("%s failed", self.what, exc_info=exc)
        elif now - self.reminded >= REMIND_SECONDS:
            self.reminded = now
            first_line = (str(exc).splitlines() or [""])[0][:200]
            self.log.error(
                "%s still failing after %.0f s (%d ticks): %s: %s",
                self.what, now - self.since, self.failures, type(exc).__name__, first_line,
            )  # fmt: skip

    def worked(self) -> None:
        if self.since is not None:
            self.log.warning(
                "%s works again after %.0f s (%d failed ticks)", self.what, self.clock() - self.since, self.failures
            )
            self.since, self.failures = None, 0

"""The checksum-load engine: one gfal2 checksum request per planned row, nothing copied.

It isolates the failure mode BNL and Lancaster hit under load (doors computing checksums of
newly written files until requests time out) from the copies themselves. A request is
driven exactly like a copy: the run driver claims a Transfer row, hands it to a thread of
the copy pool, and records the result. The row's source is the file asked about, its
destination is empty and its destination endpoint is the same endpoint (the door that
answers), so per-step and per-door figures, crash safety, steps and budgets all come from
the transfer machinery unchanged; ``duration`` is the request's latency, ``bytes`` the
bytes the door had to checksum, and ``source_checksum`` the answer.

Timeouts: gfal2's checksum call cannot be interrupted on root:// (``CORE:CHECKSUM_TIMEOUT``,
the XrdCl request timeout and ``context.cancel()`` all left a request that XRootD told to
wait 30 s running for 30 s, with gfal2 2.21.3 and XRootD 5.5.3). A request answered after
the campaign's timeout is recorded as a checksum timeout with its real latency; one that has
not answered by the copy pool's deadline (the timeout and a few seconds) is given up there and
recorded as a checksum timeout at the deadline, as a client with that timeout would see it,
and its slot goes to the next request.

XRootD keeps a file's checksum in an extended attribute and answers later requests from it,
so a load of repeated requests on a few files measures an attribute lookup: leave
``source_file_count`` empty (one file per request), as new files on a door are.
"""

from __future__ import annotations

import time

from campaigns.choices import ErrorCategory
from campaigns.runs.engines.copies import CopyJob, CopyResult
from campaigns.runs.engines.errors import categorize
from campaigns.runs.engines.gfal2.client import Gfal2Copier, gfal2


class Gfal2Checksummer(Gfal2Copier):
    """Asks the source of each job for its checksum; same contexts and credentials as copies."""

    timeout_category = ErrorCategory.CHECKSUM_TIMEOUT

    def copy(self, job: CopyJob) -> CopyResult:
        ctx, _params = self._context()
        algorithm = self.options.checksum_algorithm.upper()
        started = time.time()
        tick = time.monotonic()
        try:
            with self.in_flight(ctx):
                answer = ctx.checksum(job.source, algorithm)
        except gfal2.GError as exc:
            duration = time.monotonic() - tick
            message = str(exc.message if hasattr(exc, "message") else exc)
            category = categorize(exc.code, message)
            if category == ErrorCategory.TRANSFER_TIMEOUT:
                category = ErrorCategory.CHECKSUM_TIMEOUT  # the only stage there is
            return CopyResult(
                job, False, started, time.time(), duration, code=exc.code, message=message, category=category
            )
        duration = time.monotonic() - tick
        answer = answer.strip().lower()
        result = CopyResult(job, True, started, time.time(), duration, source_checksum=answer)
        if duration > self.options.timeout:
            result.ok = False
            result.category = ErrorCategory.CHECKSUM_TIMEOUT
            timeout = self.options.timeout
            result.message = f"{algorithm} checksum answered after {duration:.1f} s, past the {timeout} s timeout"
        elif job.checksum and answer.lstrip("0") != job.checksum.lower().lstrip("0"):
            result.ok = False
            result.category = ErrorCategory.CHECKSUM_MISMATCH
            result.message = f"{algorithm} checksum {answer} differs from the data's {job.checksum}"
        return result

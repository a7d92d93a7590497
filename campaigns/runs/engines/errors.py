"""Map an engine's error (errno and message) onto the categories of `campaigns.choices.ErrorCategory`.

The raw message is always kept beside the category; the category is what the
dashboards count, so the mapping errs on the side of "other" rather than guessing.
Order matters: a checksum *timeout* is a timeout of the checksum stage, not a
transfer timeout, and a TPC failure that says "connection refused" is still a refusal.
"""

from __future__ import annotations

import errno as errno_codes
import re

from campaigns.choices import ErrorCategory

# A door's own HTTP refusal: davix passes it on with whatever errno gfal2 picked for the stage
# (EEXIST for an upload's PUT a token does not allow), so the door's words win over that errno.
_HTTP_REFUSED = re.compile(r"\bHTTP[^0-9]{0,12}40[13]\b")
_HTTP_5XX = re.compile(
    r"\bHTTP[^0-9]{0,12}5\d\d\b"
    r"|\b5\d\d (?:Internal|Bad Gateway|Service Unavailable|Gateway Timeout)"
    r"|status(?: code)?[ :=]+5\d\d\b",
    re.I,
)
# A name that does not resolve, as gfal2 says it (checked with gfal2's Python bindings against
# a .invalid host, errno 113 EHOSTUNREACH in every case, which a reachable name can give too):
# davs/https "Result Domain name resolution failed after 1 attempts" (davix); root:// "[FATAL]
# Invalid address" (XrdCl, which resolves before it connects); curl's "Could not resolve host"
# (error 6, FTS's and gfal2's http plugins), and the resolver's own words.
_DNS = re.compile(
    r"name resolution failed|Could not resolve (?:host|hostname)|Couldn't resolve host|curl error \(6\)|"
    r"Name or service not known|Temporary failure in name resolution|No address associated with hostname|"
    r"nodename nor servname|\[FATAL\] Invalid address|unknown host",
    re.I,
)
_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"checksum.{0,40}(timed? ?out|timeout)|(timed? ?out|timeout).{0,40}checksum", re.I),
        ErrorCategory.CHECKSUM_TIMEOUT,
    ),
    (
        # XRootD's own end-to-end check says "[ERROR] CheckSum error" (XrdCl's errCheckSumError).
        re.compile(
            r"checksum.{0,60}(do not match|mismatch|differ)|(mismatch|do not match).{0,40}checksum|checksum error", re.I
        ),
        ErrorCategory.CHECKSUM_MISMATCH,
    ),
    (
        re.compile(
            r"connection refused|ECONNREFUSED|could not connect|couldn't connect|Failed to connect|curl error \(7\)",
            re.I,
        ),
        ErrorCategory.CONNECTION_REFUSED,
    ),
    (re.compile(r"no space|ENOSPC|quota exceeded|disk full|out of space", re.I), ErrorCategory.NO_SPACE),
    (
        re.compile(
            r"permission denied|EACCES|not authori[sz]ed|forbidden|\b403\b|\b401\b|unauthori[sz]ed|"
            r"operation not permitted",
            re.I,
        ),
        ErrorCategory.PERMISSION_DENIED,
    ),
    (re.compile(r"file exists|EEXIST|already exists|overwrite is not enabled", re.I), ErrorCategory.FILE_EXISTS),
    (re.compile(r"no such file|ENOENT|not found|\b404\b|does not exist", re.I), ErrorCategory.NOT_FOUND),
    (
        re.compile(
            r"timed? ?out|timeout|ETIMEDOUT|Probably stalled|max time in queue|stayed in the queue for too long|"
            r"curl error \(28\)",
            re.I,
        ),
        ErrorCategory.TRANSFER_TIMEOUT,
    ),
    (re.compile(r"cancel", re.I), ErrorCategory.CANCELLED),
    (
        re.compile(r"\bTPC\b|third.party|3rd.party|tpc authori[sz]ation|delegat|COPY (?:request|failed)", re.I),
        ErrorCategory.TPC_FAILURE,
    ),
)
_ERRNO: dict[int, str] = {
    errno_codes.ECONNREFUSED: ErrorCategory.CONNECTION_REFUSED,
    errno_codes.ENOSPC: ErrorCategory.NO_SPACE,
    errno_codes.EDQUOT: ErrorCategory.NO_SPACE,
    errno_codes.EACCES: ErrorCategory.PERMISSION_DENIED,
    errno_codes.EPERM: ErrorCategory.PERMISSION_DENIED,
    errno_codes.EEXIST: ErrorCategory.FILE_EXISTS,
    errno_codes.ENOENT: ErrorCategory.NOT_FOUND,
    errno_codes.ETIMEDOUT: ErrorCategory.TRANSFER_TIMEOUT,
    errno_codes.ECANCELED: ErrorCategory.CANCELLED,
}


def categorize(code: int | None, message: str) -> str:
    """Return the ErrorCategory value for an error code (errno) and message."""
    text = message or ""
    # Checksum problems are reported with EIO or other generic codes: read the text first.
    for pattern, category in _RULES[:2]:
        if pattern.search(text):
            return category
    if _DNS.search(text):
        return ErrorCategory.DNS  # before the errno: gfal2 gives EHOSTUNREACH, and curl's text a "connect"
    if _HTTP_5XX.search(text):
        return ErrorCategory.HTTP_5XX
    if _HTTP_REFUSED.search(text):
        return ErrorCategory.PERMISSION_DENIED
    if code in _ERRNO and code != errno_codes.ETIMEDOUT:
        return _ERRNO[code]
    for pattern, category in _RULES[2:]:
        if pattern.search(text):
            return category
    if code in _ERRNO:
        return _ERRNO[code]
    return ErrorCategory.OTHER

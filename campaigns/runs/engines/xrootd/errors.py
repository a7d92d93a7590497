"""XrdCl's statuses onto the categories every engine shares (campaigns.runs.engines.errors).

A failed copy's status carries XrdCl's own code (a socket, a post-master or a protocol error)
and, when the door answered with an error, the door's kXR code in `errno` ("[3011] ... no
such file or directory"). Both become a POSIX errno, which the shared rules read beside the
message: XrdCl's words alone ("[FATAL] Connection error") match none of them.
"""

from __future__ import annotations

import errno as errno_codes

from campaigns.runs.engines.errors import categorize

# XrdCl's status codes (XrdClStatus.hh) that say one thing.
_CLIENT_CODES: dict[int, int] = {
    102: errno_codes.ECONNREFUSED,  # errSocketError
    104: errno_codes.ECONNRESET,  # errSocketDisconnected
    108: errno_codes.ECONNREFUSED,  # errConnectionError: nothing listened, or it hung up at once
    103: errno_codes.ETIMEDOUT,  # errSocketTimeout
    206: errno_codes.ETIMEDOUT,  # errOperationExpired
    207: errno_codes.ECANCELED,  # errOperationInterrupted: the progress handler asked to cancel
    203: errno_codes.EACCES,  # errLoginFailed
    204: errno_codes.EACCES,  # errAuthFailed
    304: errno_codes.ENOENT,  # errNotFound
}
ERROR_RESPONSE = 400  # errErrorResponse: the door answered with a kXR error code, in errno
# The door's kXR error codes (XProtocol.hh) that say one thing.
_DOOR_CODES: dict[int, int] = {
    3009: errno_codes.ENOSPC,  # kXR_NoSpace
    3010: errno_codes.EACCES,  # kXR_NotAuthorized
    3011: errno_codes.ENOENT,  # kXR_NotFound
    3017: errno_codes.ECANCELED,  # kXR_Cancelled ("destination file prematurely closed": a TPC cancelled)
    3018: errno_codes.EEXIST,  # kXR_ItExists
    3021: errno_codes.EDQUOT,  # kXR_overQuota
    3025: errno_codes.EROFS,  # kXR_fsReadOnly
    3030: errno_codes.EACCES,  # kXR_AuthFailed
    3034: errno_codes.ETIMEDOUT,  # kXR_ReqTimedOut
    3035: errno_codes.ETIMEDOUT,  # kXR_TimerExpired
}


def status_errno(code: int, door_code: int) -> int | None:
    """The POSIX errno of an XrdCl status (its code, and the door's kXR code); None: none fits."""
    if code == ERROR_RESPONSE:
        return _DOOR_CODES.get(door_code)
    return _CLIENT_CODES.get(code)


def categorize_status(code: int, door_code: int, message: str) -> tuple[str, int | None]:
    """Category and POSIX errno of a failed copy's XrdCl status; the message is kept by the caller."""
    posix = status_errno(code, door_code)
    return categorize(posix, message), posix

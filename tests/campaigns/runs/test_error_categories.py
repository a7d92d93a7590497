"""Engine errors map onto the categories of campaigns.choices.ErrorCategory; messages are those seen from gfal2,
XRootD, davix and FTS."""

from __future__ import annotations

import pytest

from campaigns.runs.engines.errors import categorize


@pytest.mark.parametrize(
    ("code", "message", "category"),
    [
        (5, "Source and destination checksums do not match", "checksum_mismatch"),
        (5, "SOURCE [5] Source and user-defined adler32 checksum do not match (8bcc446b != 00000001)",
         "checksum_mismatch"),
        (110, "Checksum calculation timed out on the destination", "checksum_timeout"),
        (None, "TRANSFER [110] Operation timed out", "transfer_timeout"),
        (None, "TRANSFER [70] Transfer forcefully killed: Probably stalled", "transfer_timeout"),
        (110, "Connection timed out", "transfer_timeout"),
        (70, "HTTP 500 : Unexpected server error: 500 Internal Server Error", "http_5xx"),
        (None, "Result HTTP 503 Service Unavailable", "http_5xx"),
        (111, "Connection refused", "connection_refused"),
        (28, "No space left on device", "no_space"),
        (13, "Permission denied", "permission_denied"),
        (None, "HTTP 403 : Permission refused", "permission_denied"),
        (2, "SOURCE [2] Failed to stat file (No such file or directory)", "not_found"),
        (17, "DESTINATION [17] Destination file exists and overwrite is not enabled", "file_exists"),
        (125, "Transfer canceled", "cancelled"),
        (95, "Error on XrdCl::CopyProcess::Run(): [ERROR] Operation not supported: Destination does not support "
             "delegation.", "tpc_failure"),
        (None, "Something nobody has seen before", "other"),
    ],
)  # fmt: skip
def test_categorize(code, message, category):
    assert categorize(code, message) == category

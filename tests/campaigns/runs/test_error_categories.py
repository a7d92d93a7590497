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
        (17, "Copy failed (streamed). Last attempt: HTTP 403 : Permission refused  (destination)", "permission_denied"),
        (2, "SOURCE [2] Failed to stat file (No such file or directory)", "not_found"),
        (17, "DESTINATION [17] Destination file exists and overwrite is not enabled", "file_exists"),
        (125, "Transfer canceled", "cancelled"),
        (95, "Error on XrdCl::CopyProcess::Run(): [ERROR] Operation not supported: Destination does not support "
             "delegation.", "tpc_failure"),
        # A host name that does not resolve, as gfal2 said it here (errno 113 each time): davix
        # for davs:// and https://, XrdCl for root://, curl in FTS's wording, the resolver's own.
        (113, "DESTINATION OVERWRITE   Result Domain name resolution failed after 1 attempts", "dns"),
        (113, "Could not open source: Result Domain name resolution failed after 1 attempts", "dns"),
        (113, "Error on XrdCl::CopyProcess::Run(): [FATAL] Invalid address:  (destination)", "dns"),
        (None, "DESTINATION [113] Result Domain name resolution failed after 1 attempts", "dns"),
        (None, "TRANSFER [6] curl error (6): Could not resolve host: door9.example.org", "dns"),
        (None, "SOURCE [2] getaddrinfo: Name or service not known", "dns"),
        # A host that resolves but cannot be reached is not a DNS failure.
        (113, "Failed to stat file (No route to host)", "other"),
        (None, "Something nobody has seen before", "other"),
    ],
)  # fmt: skip
def test_categorize(code, message, category):
    assert categorize(code, message) == category


@pytest.mark.parametrize("scheme", ["root", "davs", "https"])
def test_gfal2_copy_to_a_host_that_does_not_resolve_is_a_dns_failure(tmp_path, scheme):
    """The real gfal2 (its root:// and http plugins) against a name under .invalid, which no
    resolver answers (RFC 6761): the category comes from what gfal2 really says."""
    from campaigns.runs.engines.copies import CopyJob, CopyOptions
    from campaigns.runs.engines.gfal2.client import Gfal2Copier

    source = tmp_path / "one"
    source.write_bytes(b"x" * 1024)
    job = CopyJob(id=1, index=0, source=f"file://{source}", destination=f"{scheme}://door.storageops-test.invalid//f",
                  size=1024, step=0, attempt=1)  # fmt: skip
    result = Gfal2Copier(CopyOptions(checksum_mode="none", timeout=60)).copy(job)
    assert not result.ok
    assert result.category == "dns", (result.code, result.message)

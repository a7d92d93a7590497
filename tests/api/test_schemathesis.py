"""Property-based requests against a real gunicorn on the test database, generated from the live
OpenAPI schema by schemathesis' own command line: no 5xx, and responses that conform to the schema."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from campaigns import runs
from campaigns.runs.lifecycle import RunDriver
from storageops.api import tokens
from tests.support.factories import mock_campaign
from tests.support.processes import ROOT
from tests.support.web import gunicorn_server

# It took 798-860 s beside a stressed suite: the suite's 600 s limit would cut it short.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.timeout(1700)]

# Per operation, in the fuzzing phase. FUZZ_EXAMPLES=50 (or more) runs a deeper fuzz on demand.
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "15"))
# The coverage phase (every field's boundary and wrong values, for each of 85 operations: 14,900
# of 15,814 cases) took 533 s of one test process, with its server, on CI's two cores beside the
# suite: a quarter of CI's budget. The suite runs the fuzzing and stateful phases (negative cases
# too); FUZZ_COVERAGE=1 adds the coverage phase, for a release or a change to the API's schema.
PHASES = "examples,fuzzing,stateful" + (",coverage" if os.environ.get("FUZZ_COVERAGE") == "1" else "")


def test_api_conforms_to_its_live_schema(admin_user, tmp_path, log_dir):
    # Something to read, start and clone, and a finished run whose transfers can be fetched.
    RunDriver(runs.create_run(mock_campaign("fuzz-target", file_count=5), trigger="api").pk).drive()
    secret = tokens.create_token(admin_user, "schemathesis", "admin")[1]
    # The deployed server, not Django's threaded development server, which dropped one
    # connection under load ("Connection aborted", 1 of 10,905 requests with both cores busy).
    # Two of its workers and two of schemathesis': its coverage phase alone grew to 13,953
    # cases (558 s in one line beside the suite) with 73 operations.
    web, base = gunicorn_server(log_dir, workers=2)
    try:
        result = _schemathesis(base, secret, tmp_path)
    finally:
        web.stop()
    assert "Traceback" not in web.log_text(), web.log_text()[-4000:]
    report = tmp_path / "schemathesis.txt"
    report.write_text(result.stdout + result.stderr)
    assert result.returncode == 0, f"full report in {report}\n" + _failures(result.stdout) + result.stderr[-2000:]
    generated, passed = _test_cases(result.stdout)
    assert generated >= 1000, result.stdout[-3000:]
    assert passed == generated, result.stdout[-3000:]


def _schemathesis(base: str, secret: str, tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(ROOT / ".venv" / "bin" / "schemathesis"), "run", f"{base}/api/schema/",
         "--header", f"Authorization: Token {secret}", "--max-examples", str(EXAMPLES), "--seed", "20261122",
         "--phases", PHASES,
         "--checks", "not_a_server_error,status_code_conformance,content_type_conformance,"
         "response_schema_conformance", "--workers", "2", "--request-timeout", "30"],
        capture_output=True, text=True, timeout=1500, cwd=tmp_path,  # its cache stays out of the work tree
    )  # fmt: skip


def _failures(text: str) -> str:
    """The FAILURES section of schemathesis' report (the summary after it is mostly warnings)."""
    start = text.find("FAILURES")
    return text[start : start + 12000] if start >= 0 else text[-6000:]


def _test_cases(text: str) -> tuple[int, int]:
    """Schemathesis' own count of the requests it generated and of those that passed every check:
    "Test cases:\n  7691 generated, 7691 passed"."""
    found = re.search(r"Test cases:\s*(\d+) generated, (\d+) passed", text)
    return (int(found[1]), int(found[2])) if found else (0, 0)

"""The readiness check of endpoints on a token issuer, on doors that check its tokens (Debian's
SciTokens plugin) and on one that accepts any token: the DOMA smoke test's token rounds."""

from __future__ import annotations

import pytest

from campaigns import readiness
from campaigns.models import ReadinessCheck, ReadinessGrid
from campaigns.readiness import grid as readiness_grid
from tests.support.factories import endpoint

pytestmark = pytest.mark.django_db

TOKEN_STEPS = ("token-read", "token-read-only-write", "token-elsewhere-write")


def run(a, b=None, grid=None) -> ReadinessCheck:
    check = ReadinessCheck(endpoint=a, peer=b, grid=grid)
    check.save()
    return readiness.run_check(check)


def states(check: ReadinessCheck) -> dict[str, str]:
    return {s["key"]: s["state"] for s in check.steps}


def test_doors_that_check_tokens_pass_and_refuse_the_wrong_ones(token_site):
    _, a, b, row = token_site
    creds = {"token_issuer": row, "ca_dir": str(a.https.ca_dir)}
    one = endpoint("ready-tok-a", a.davs_url_for("/data/ready-tok/"), **creds)
    two = endpoint("ready-tok-b", b.davs_url_for("/data/ready-tok/"), **creds)
    check = run(one, two)
    print(*(f"{s['state']:8} {s['title']} [{s['credentials']}]: {s['message']}" for s in check.steps), sep="\n")
    assert check.state == ReadinessCheck.State.PASSED, check.summary
    found = states(check)
    assert {f"{key}:{ep.name}" for key in TOKEN_STEPS for ep in (one, two)} <= set(found)
    refused = [s for s in check.steps if s["operation"] == "refused"]
    assert len(refused) == 4 and all("refused by the door, as it must be" in s["message"] for s in refused)
    assert all("403" in s["message"] for s in refused)
    assert not a.local_path(f"/data/ready-tok/storageops-readiness/check-{check.pk}/refused-read-only").exists()


def test_a_door_that_accepts_any_token_is_a_red_cell(token_site, xrootd_https_pair, test_ca):
    """A door without the plugin (it lets anyone write) behind an endpoint on the issuer: its
    reads and writes pass, and both writes it should have refused fail the check."""
    row = token_site[3]
    open_door = xrootd_https_pair[0]
    lax = endpoint("lax-door", open_door.davs_url_for("/data/lax/"), token_issuer=row, ca_dir=str(test_ca.ca_dir))
    grid = ReadinessGrid.objects.create()
    check = run(lax, grid=grid)
    assert check.state == ReadinessCheck.State.FAILED
    failed = {k for k, v in states(check).items() if v == "failed"}
    assert failed == {"token-read-only-write:lax-door", "token-elsewhere-write:lax-door"}, check.steps
    assert all("the door accepted it" in s["message"] for s in check.steps if s["key"] in failed)
    # What the door took is removed with the rest of the check's files.
    assert not open_door.local_path(f"/data/lax/storageops-readiness/check-{check.pk}/refused-read-only").exists()
    (row_cells,) = readiness_grid.rows(grid)
    refused = row_cells.cells[readiness_grid.COLUMNS.index("refused")]
    assert refused.state == "failed" and refused.text == "failed (2 of 2)"
    assert row_cells.cells[readiness_grid.COLUMNS.index("upload")].state == "passed"

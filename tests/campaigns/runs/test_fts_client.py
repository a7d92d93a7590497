"""The FTS client against the double's REST answers (the shapes seen on a real FTS3 3.14):
errors come back with FTS's own message, whatever their shape."""

from __future__ import annotations

import pytest
import requests

from campaigns.runs.engines.fts import FtsClient, FtsError, FtsSettings
from tests.support.fts_double import FtsDouble


@pytest.fixture
def double():
    fts = FtsDouble(token="t0k").start()
    try:
        yield fts
    finally:
        fts.stop()


def client(double: FtsDouble, token: str = "t0k") -> FtsClient:  # noqa: S107 - the double's test token
    return FtsClient(FtsSettings(url=double.url, bearer_token=token))


def test_submission_errors_carry_fts_messages(double):
    fts = client(double)
    with pytest.raises(FtsError) as info:
        fts.submit({"files": [{"sources": ["foo"], "destinations": ["root://b//x"]}]})
    assert (info.value.status, info.value.message) == (400, "Invalid value within the request: Missing scheme (foo)")
    with pytest.raises(FtsError) as info:
        fts.submit({"files": []})
    assert info.value.message == "No valid pairs available"
    raw = requests.post(double.url + "/jobs", data="{not json", headers={"Authorization": "Bearer t0k"}, timeout=5)
    assert raw.status_code == 400 and raw.json() == {
        "status": "400 Bad Request",
        "message": "Badly formatted JSON request",
    }
    with pytest.raises(FtsError) as info:
        client(double, token="wrong").submit({"files": []})
    assert info.value.status == 403


def test_unknown_jobs_and_link_config_shapes(double):
    fts = client(double)
    missing = fts.jobs(["0000-missing"])
    assert missing == [{"job_id": "0000-missing", "http_status": "404 Not Found",
                        "http_message": 'No job with the id "0000-missing" has been found'}]  # fmt: skip
    html = requests.get(double.url + "/config/links", headers={"Authorization": "Bearer t0k"}, timeout=5)
    assert html.headers["Content-Type"].startswith("text/html")
    assert [c["symbolicname"] for c in fts.links()] == ["*"] and fts.links()[0]["max_active"] == 130
    with pytest.raises(FtsError) as info:
        fts.set_link({"source": "root://a", "destination": "root://b", "min_active": 5, "max_active": 5})
    assert (info.value.status, info.value.message) == (400, "Missing symbolicname")
    echoed = fts.set_link({"source": "root://a", "destination": "root://b", "symbolicname": "ab",
                           "min_active": 5, "max_active": 5})  # fmt: skip
    assert {k: echoed[k] for k in ("symbolicname", "min_active", "max_active")} == {
        "symbolicname": "ab", "min_active": 5, "max_active": 5}  # fmt: skip
    fts.delete_link("ab")
    assert [c["symbolicname"] for c in fts.links()] == ["*"]
    assert fts.audit() is None  # fts-rest-flask answers 404 on /config/audit: "unsupported", not an error


def test_no_delegation_is_419_with_a_hint():
    fts = FtsDouble(delegated=False).start()
    try:
        with pytest.raises(FtsError) as info:
            FtsClient(FtsSettings(url=fts.url)).submit({"files": [{"sources": ["root://a//x"],
                                                                   "destinations": ["root://b//y"]}]})  # fmt: skip
    finally:
        fts.stop()
    assert info.value.status == 419 and info.value.message.startswith("No delegation found")
    assert "fts-rest-delegate" in info.value.message

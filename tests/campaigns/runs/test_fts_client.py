"""The FTS client against the double's REST answers (the shapes seen on a real FTS3 3.14):
errors come back with FTS's own message, whatever their shape."""

from __future__ import annotations

import time

import pytest
import requests

from campaigns.runs.engines.fts.client import FtsClient, FtsError, FtsSettings
from tests.support.fts_double import FtsDouble


@pytest.fixture
def double():
    fts = FtsDouble(optimizer_interval=1.0, token="t0k").start()
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
    sent = {"source": "root://a", "destination": "root://b", "symbolicname": "ab", "min_active": 5, "max_active": 5}
    assert fts.set_link(sent) == sent  # echoes only the fields sent
    # A later GET shows the link's other columns: null, and no_delegation off.
    stored = next(c for c in fts.links() if c["symbolicname"] == "ab")
    assert stored == {**sent, "nostreams": None, "optimizer_mode": None, "tcp_buffer_size": None,
                      "no_delegation": False}  # fmt: skip
    fts.delete_link("ab")
    assert [c["symbolicname"] for c in fts.links()] == ["*"]
    # fts-rest-flask 3.13 answers the audit: newest first, {action, datetime, dn, config}.
    audit = fts.audit()
    assert [(a["action"], a["dn"]) for a in audit] == [("link-delete", "token-user"), ("link", "token-user")]
    assert set(audit[0]) == {"action", "datetime", "dn", "config"}


def test_a_server_without_the_audit_answers_404_and_the_client_says_unsupported():
    fts = FtsDouble(optimizer_interval=1.0, audit=False).start()
    try:
        assert FtsClient(FtsSettings(url=fts.url)).audit() is None
    finally:
        fts.stop()


def test_job_shapes_while_running_and_the_cancel_of_an_ended_job(double):
    fts = client(double)
    body = {"files": [{"sources": ["mock://src.test/c/0?size=1000"],
                       "destinations": ["mock://dst.test/c/0?time=1"], "filesize": 1000}],
            "params": {"job_metadata": {"run": 1}}}  # fmt: skip
    job_id = fts.submit(body)
    (status,) = fts.jobs([job_id])
    assert status["job_metadata"] == {"run": 1, "auth_method": "oauth2"}  # fts-rest-flask adds it
    assert status["reason"] is None and status["files"][0]["filesize"] is None  # until it finishes
    deadline = time.monotonic() + 10
    while fts.jobs([job_id])[0]["job_state"] != "FINISHED":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert fts.jobs([job_id])[0]["files"][0]["filesize"] == 1000
    # Cancelling a job that has ended: 200, "304 Not Modified" in the body.
    (answer,) = fts.cancel([job_id])
    assert (answer["http_status"], answer["job_state"]) == ("304 Not Modified", "FINISHED")
    raw = requests.delete(double.url + "/jobs/" + job_id, headers={"Authorization": "Bearer t0k"}, timeout=5)
    assert raw.status_code == 200 and raw.json()["http_message"] == "The job is in a terminal state"


def test_no_delegation_is_419_with_a_hint():
    fts = FtsDouble(optimizer_interval=1.0, delegated=False).start()
    try:
        with pytest.raises(FtsError) as info:
            FtsClient(FtsSettings(url=fts.url)).submit({"files": [{"sources": ["root://a//x"],
                                                                   "destinations": ["root://b//y"]}]})  # fmt: skip
    finally:
        fts.stop()
    assert info.value.status == 419 and info.value.message.startswith("No delegation found")
    assert "fts-rest-delegate" in info.value.message

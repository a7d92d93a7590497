"""The readiness check on real XRootD doors: every step passes on two healthy doors, and with the
destination read-only exactly the steps that write there fail, in the door's own words."""

from __future__ import annotations

import os
import time

import pytest

from campaigns import readiness
from campaigns.models import Campaign, ReadinessCheck
from tests.support.api import api
from tests.support.factories import campaign, endpoint

pytestmark = pytest.mark.django_db


def _check(a, b=None) -> ReadinessCheck:
    check = ReadinessCheck(endpoint=a, peer=b)
    check.save()
    return check


def test_the_plan_follows_the_schemes():
    root_a, root_b = endpoint("ra", "root://127.0.0.1:1094//data/"), endpoint("rb", "root://127.0.0.1:1095//data/")
    davs_a, davs_b = endpoint("da", "davs://127.0.0.1:2880/data/"), endpoint("db", "davs://127.0.0.1:2881/data/")
    keys = [s.key for s in readiness.plan(_check(root_a, root_b))]
    assert [k for k in keys if k.startswith("tpc")] == ["tpc-tpc:ra>rb", "tpc-tpc:rb>ra"]
    assert keys[:4] == ["upload:ra", "stat:ra", "checksum:ra", "download:ra"]
    davs = [s.key for s in readiness.plan(_check(davs_a, davs_b)) if s.operation == "tpc"]
    assert davs == ["tpc-pull:da>db", "tpc-push:da>db", "tpc-pull:db>da", "tpc-push:db>da"]
    gsi_a, gsi_b = endpoint("ga", "gsiftp://127.0.0.1:2811/data/"), endpoint("gb", "gsiftp://127.0.0.1:2812/data/")
    assert [s.key for s in readiness.plan(_check(gsi_a, gsi_b)) if s.operation == "tpc"] == [
        "tpc-tpc:ga>gb",
        "tpc-tpc:gb>ga",
    ]
    # Between root:// and davs:// there is no third-party copy: none is planned.
    assert not [s for s in readiness.plan(_check(root_a, davs_a)) if s.operation == "tpc"]
    # Every file written is deleted, after the step that wrote it.
    steps = readiness.plan(_check(root_a, root_b))
    writers = [s for s in steps if s.operation in ("upload", "tpc")]
    deletes = [s for s in steps if s.operation == "delete"]
    assert [d.needs for d in deletes] == [(w.key,) for w in writers]
    assert [d.destination for d in deletes] == [w.destination for w in writers]


def test_a_mock_endpoint_or_the_same_endpoint_twice_is_refused():
    real = endpoint("real", "root://127.0.0.1:1094//data/")
    with pytest.raises(Exception, match="mock"):
        _check(endpoint("fake", "mock://fake.test/data/"))
    with pytest.raises(Exception, match="another endpoint"):
        _check(real, real)


def test_two_healthy_doors_pass_every_step_and_keep_nothing(xrootd_pair):
    door1, door2 = xrootd_pair
    a = endpoint("ready-1", door1.root_url_for("/data/ready/"))
    b = endpoint("ready-2", door2.root_url_for("/data/ready/"))
    check = readiness.run_check(_check(a, b))
    assert check.state == ReadinessCheck.State.PASSED, check.steps
    assert [s["state"] for s in check.steps] == ["passed"] * 14
    assert check.summary == "All 14 steps passed."
    tpc = [s for s in check.steps if s["operation"] == "tpc"]
    assert [s["title"] for s in tpc] == ["TPC ready-1 → ready-2", "TPC ready-2 → ready-1"]
    checksum = next(s for s in check.steps if s["key"] == "checksum:ready-1")
    assert checksum["message"].startswith("adler32 ") and "equal to the data written" in checksum["message"]
    # Nothing is left on either door's disk: the files and the check's folder are gone.
    for door in (door1, door2):
        folder = door.local_path(f"/data/ready/storageops-readiness/check-{check.pk}")
        assert not folder.exists(), sorted(os.listdir(folder))


def test_a_read_only_destination_fails_exactly_the_steps_that_write_there(xrootd_pair):
    door1, door2 = xrootd_pair
    # The folder the check writes below belongs to root and is not writable: the door (nobody)
    # can read it, as from a pool set read-only, and must refuse every write.
    read_only = door2.local_path("/data/read-only")
    read_only.mkdir(parents=True, exist_ok=True)
    os.chmod(read_only, 0o555)  # noqa: S103 -- the door must traverse it, and not write
    (read_only / "kept").write_bytes(b"k")
    a = endpoint("rw-door", door1.root_url_for("/data/rw/"))
    b = endpoint("ro-door", door2.root_url_for("/data/read-only/"))
    check = readiness.run_check(_check(a, b))
    assert check.state == ReadinessCheck.State.FAILED
    by_state: dict[str, set[str]] = {}
    for step in check.steps:
        by_state.setdefault(step["state"], set()).add(step["key"])

    def delete(of: str) -> str:
        return next(s["key"] for s in check.steps if s["operation"] == "delete" and s["key"].endswith(of))

    # The writes to the read-only door fail; what would read their files is not run; the other
    # door's own steps, its delete included, pass.
    assert by_state["failed"] == {"upload:ro-door", "tpc-tpc:rw-door>ro-door"}
    assert all(s["writes"] and s["endpoint"] == "ro-door" for s in check.steps if s["state"] == "failed")
    assert by_state["passed"] == {"upload:rw-door", "stat:rw-door", "checksum:rw-door", "download:rw-door",
                                  delete(f"rw/storageops-readiness/check-{check.pk}/probe")}  # fmt: skip
    assert by_state["skipped"] == {
        "stat:ro-door", "checksum:ro-door", "download:ro-door", "tpc-tpc:ro-door>rw-door",
        delete(f"read-only/storageops-readiness/check-{check.pk}/probe"), delete("from-rw-door-tpc"),
        delete("from-ro-door-tpc"),
    }  # fmt: skip
    # The door's own words, not ours.
    for step in check.steps:
        if step["state"] == "failed":
            assert "permission denied" in step["message"].lower(), step
        if step["state"] == "skipped":
            assert step["message"].startswith("Not run: ") and "did not pass" in step["message"]
    print(*(f"{s['state']:8} {s['seconds']} {s['title']}: {s['message']}" for s in check.steps), sep="\n")
    assert check.summary.startswith("5 of 14 steps passed; first failure: Upload to ro-door: ")
    # Nothing was written into the read-only folder, and the other door keeps nothing either.
    assert os.listdir(read_only) == ["kept"] and (read_only / "kept").read_bytes() == b"k"
    assert not door1.local_path(f"/data/rw/storageops-readiness/check-{check.pk}").exists()


def test_started_from_the_endpoint_page_a_worker_runs_it_and_the_page_shows_the_grid(
    client, operator, viewer, xrootd_pair, worker
):
    door1, door2 = xrootd_pair
    a = endpoint("page-1", door1.root_url_for("/data/page/"))
    b = endpoint("page-2", door2.root_url_for("/data/page/"))
    campaign("page-sweep", [a], [b])
    # Before any check, the campaign page offers one for both doors.
    client.force_login(viewer)
    page = client.get(f"/campaigns/{Campaign.objects.get(name='page-sweep').pk}/").content.decode()
    assert 'id="readiness-advice"' in page and "page-1" in page and "page-2" in page
    # A viewer may look but not start one.
    assert client.post(f"/campaigns/endpoints/{a.pk}/readiness/", {"peer": b.pk}).status_code == 403
    client.force_login(operator)
    assert "Run a readiness check" in client.get(f"/campaigns/endpoints/{a.pk}/").content.decode()
    response = client.post(f"/campaigns/endpoints/{a.pk}/readiness/", {"peer": b.pk})
    check = ReadinessCheck.objects.get(endpoint=a, peer=b)
    assert response.status_code == 302 and response["Location"] == f"/campaigns/readiness/{check.pk}/"
    assert check.requested_by == operator
    deadline = time.monotonic() + 120
    while check.state not in ("passed", "failed"):
        assert time.monotonic() < deadline, (check.state, check.steps, worker.log_text()[-3000:])
        time.sleep(0.5)
        check.refresh_from_db()
    assert check.state == "passed", check.steps
    page = client.get(check.get_absolute_url()).content.decode()
    assert page.count('data-state="passed"') == 14 and "hx-trigger" not in page
    assert 'data-step="tpc-tpc:page-1&gt;page-2"' in page
    # Both doors passed now: the campaign page no longer asks for a check.
    page = client.get(f"/campaigns/{Campaign.objects.get(name='page-sweep').pk}/").content.decode()
    assert 'id="readiness-advice"' not in page
    # A peer that is the endpoint itself is refused with a message, and nothing is queued.
    response = client.post(f"/campaigns/endpoints/{a.pk}/readiness/", {"peer": a.pk}, follow=True)
    assert "Cannot check page-1" in response.content.decode()
    assert ReadinessCheck.objects.filter(endpoint=a).count() == 1


def test_each_credential_is_checked_on_its_own_and_a_broken_proxy_fails_only_its_steps(
    xrootd_https_pair, test_ca, tmp_path
):
    """An endpoint with a token and an X.509 proxy is checked with each (the DOMA smoke test's
    with-token and with-X.509 rounds). A proxy file gone missing, the commonest X.509 breakage,
    is named by the check's first X.509 step and every step that would present it is not run:
    gfal2 itself goes on without the file (the door here lets anyone write), and would pass
    uploads that never presented the proxy. The token's steps all pass."""
    a, b = xrootd_https_pair
    token = {"bearer_token": "storageops-test", "ca_dir": str(test_ca.ca_dir)}
    missing = tmp_path / "x509up_u0"
    both = endpoint("both-creds", a.davs_url_for("/data/creds/"), x509_proxy=str(missing), **token)
    peer = endpoint("token-only", b.davs_url_for("/data/creds/"), **token)
    assert readiness.auth_variants(both) == [("token", "bearer token"), ("x509", "X.509")]
    check = readiness.run_check(_check(both, peer))
    print(*(f"{s['state']:8} {s['title']} [{s['credentials']}]: {s['message']}" for s in check.steps), sep="\n")
    states = {s["key"]: s["state"] for s in check.steps}
    x509 = {k for k in states if k.endswith("[x509]") or "-x509" in k}
    assert [k for k, v in states.items() if v == "failed"] == ["proxy:both-creds"]
    proxy = check.steps[[s["key"] for s in check.steps].index("proxy:both-creds")]
    assert proxy["message"] == f"the X.509 proxy {missing} does not exist (errno 2)"
    assert len(x509) == 9 and all(states[k] == "skipped" for k in x509), states  # 4 own, 2 copies, 3 deletes
    assert all(v == "passed" for k, v in states.items() if k not in x509 and k != "proxy:both-creds"), states
    assert {"upload:both-creds[token]", "tpc-pull:both-creds>token-only[token]", "upload:token-only"} <= set(states)
    # Given a readable, unexpired certificate, the proxy step passes and names its end.
    pem = tmp_path / "x509up_valid"
    pem.write_bytes(test_ca.host_cert.read_bytes() + test_ca.host_key.read_bytes())
    both.x509_proxy = str(pem)
    both.save()
    again = readiness.run_check(_check(both))
    step = next(s for s in again.steps if s["key"] == "proxy:both-creds")
    assert step["state"] == "passed" and step["message"].startswith(f"{pem}: valid until "), step


def test_through_the_api_an_operator_starts_one_a_viewer_may_only_read_it(operator, viewer, xrootd_pair, worker):
    door1, door2 = xrootd_pair
    a = endpoint("api-ready-1", door1.root_url_for("/data/api-ready/"))
    b = endpoint("api-ready-2", door2.root_url_for("/data/api-ready/"))
    fake = endpoint("api-ready-mock", "mock://fake.test/data/")
    as_operator, as_viewer = api(operator, "operator"), api(viewer, "viewer")
    assert as_viewer.post("/api/v1/readiness-checks/", {"endpoint": a.pk}, format="json").status_code == 403
    # Refused with the field named, and nothing queued: the same endpoint twice, a mock, no endpoint.
    for body, field in (({"endpoint": a.pk, "peer": a.pk}, "peer"), ({"endpoint": fake.pk}, "endpoint"),
                        ({"peer": b.pk}, "endpoint"), ({"endpoint": "a"}, "endpoint")):  # fmt: skip
        refused = as_operator.post("/api/v1/readiness-checks/", body, format="json")
        assert refused.status_code == 400 and field in refused.json()["error"]["fields"], refused.content
    assert not ReadinessCheck.objects.exists()
    started = as_operator.post("/api/v1/readiness-checks/", {"endpoint": a.pk, "peer": b.pk}, format="json")
    assert started.status_code == 202 and started.json()["state"] == "queued", started.content
    url = f"/api/v1/readiness-checks/{started.json()['id']}/"
    deadline = time.monotonic() + 120
    while (body := as_viewer.get(url).json())["state"] not in ("passed", "failed"):
        assert time.monotonic() < deadline, (body, worker.log_text()[-3000:])
        time.sleep(0.5)
    assert body["state"] == "passed" and body["summary"] == "All 14 steps passed.", body
    assert [s["state"] for s in body["steps"]] == ["passed"] * 14
    assert body["endpoint_name"] == "api-ready-1" and body["peer_name"] == "api-ready-2"
    assert body["requested_by"] == operator.pk
    listed = as_viewer.get(f"/api/v1/readiness-checks/?endpoint={a.pk}&state=passed").json()
    assert [c["id"] for c in listed["results"]] == [body["id"]]

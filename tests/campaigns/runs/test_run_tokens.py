"""Run-scoped storage tokens against doors that check them (Debian's xrootd-scitokens-plugins),
from an issuer double serving its keys over HTTPS (the `token_doors` fixture).

The doors refuse a request without a valid token of that issuer whose scopes cover the path, so
a copy that succeeds here proves its token's scopes, and one refused shows the door's own words.
"""

from __future__ import annotations

import json
import logging

import pytest
from django.test import Client

from campaigns import runs
from campaigns.choices import RunState
from campaigns.models import Run, Transfer
from campaigns.runs import tokens
from campaigns.runs.lifecycle import RunDriver
from collectors.models import Event
from tests.support.api import api
from tests.support.factories import campaign, endpoint

pytestmark = pytest.mark.django_db(transaction=True)


def token_endpoints(token_site, name: str):
    """An endpoint on each door below /data/<name>/, both on the issuer."""
    _, *doors, row = token_site
    creds = {"token_issuer": row, "ca_dir": str(doors[0].https.ca_dir)}
    return [endpoint(f"{name}-{n}", door.davs_url_for(f"/data/{name}/"), **creds) for n, door in enumerate(doors)]


def drive(obj) -> Run:
    run = runs.create_run(obj, trigger="command")
    RunDriver(run.pk).drive()
    run.refresh_from_db()
    return run


def test_a_run_copies_with_tokens_scoped_to_its_own_folders(token_site, admin_user, caplog):
    issuer = token_site[0]
    src, dst = token_endpoints(token_site, "scoped")
    obj = campaign("tokens-scoped", [src], [dst], file_count=12, file_size=100_000, create_sources=True,
                   checksum_mode="both", tpc_mode="pull", concurrency_steps=[4])  # fmt: skip
    before = len(issuer.issued)
    with caplog.at_level(logging.DEBUG):
        run = drive(obj)
    errors = list(Transfer.objects.filter(run=run).values_list("error_message", flat=True).distinct())
    assert run.state == RunState.SUCCEEDED, (run.error, errors)
    assert (run.files_done, run.files_failed) == (12, 0)
    asked = issuer.issued[before:]
    # One token per endpoint, each for its part of this run only.
    assert sorted(item.scope for item in asked) == sorted([
        f"storage.create:/scoped/storageops/source/run-{run.pk}-sources "
        f"storage.modify:/scoped/storageops/source/run-{run.pk}-sources "
        f"storage.read:/scoped/storageops/source/run-{run.pk}-sources",
        f"storage.create:/scoped/storageops/runs/run-{run.pk} storage.modify:/scoped/storageops/runs/run-{run.pk} "
        f"storage.read:/scoped/storageops/runs/run-{run.pk}",
    ])  # fmt: skip
    assert {item.audience for item in asked} == {token_site[3].audience}
    assert all(ep["has_token"] for ep in [*run.snapshot["sources"], *run.snapshot["destinations"]])

    # No token in the records, the events, the run, the logs or the API.
    signatures = [item.signature for item in asked]
    texts = [
        json.dumps(list(Transfer.objects.filter(run=run).values()), default=str),
        json.dumps(list(Event.objects.filter(run_id=run.pk).values()), default=str),
        json.dumps(list(Run.objects.filter(pk=run.pk).values()), default=str),
        caplog.text,
    ]
    client = api(admin_user, "admin")
    for path in (f"/api/v1/runs/{run.pk}/", f"/api/v1/transfers/?run={run.pk}", f"/api/v1/endpoints/{src.pk}/",
                 "/api/v1/token-issuers/"):  # fmt: skip
        answer = client.get(path)
        assert answer.status_code == 200, path
        texts.append(answer.content.decode())
    assert not [s for s in signatures for text in texts if s in text]
    assert issuer.client_secret not in texts[-1]
    web = Client()
    web.force_login(admin_user)
    assert "tokens from test-iam, scoped to each run" in web.get(f"/campaigns/endpoints/{src.pk}/").content.decode()


def test_a_write_with_a_read_only_token_is_refused_by_the_door(token_site, monkeypatch):
    _, a, b, _ = token_site
    src, dst = token_endpoints(token_site, "readonly")
    a.write_local("/data/readonly/src/1000/src-0000000", b"\x5a" * 1000)
    # What a mis-scoped issuer would give: read where the run writes.
    monkeypatch.setattr(tokens, "WRITE", tokens.READ)
    obj = campaign("tokens-readonly", [src], [dst], file_count=2, file_size=1000, source_file_count=1,
                   source_path="src", checksum_mode="none", tpc_mode="pull", retries=0)  # fmt: skip
    run = drive(obj)
    assert (run.files_done, run.files_failed) == (0, 2)
    for transfer in Transfer.objects.filter(run=run):
        assert transfer.error_category == "permission_denied", transfer.error_message
        assert "403" in transfer.error_message and "Permission refused" in transfer.error_message
    assert not b.local_path(f"/data/readonly/storageops/runs/run-{run.pk}/f0000000").exists()


def test_a_token_shorter_than_the_run_is_renewed_with_no_failure(token_site, monkeypatch):
    issuer, a, _, _ = token_site
    src, dst = token_endpoints(token_site, "renewed")
    for number in range(4):
        a.write_local(f"/data/renewed/src/200000/src-{number:07d}", b"\x5a" * 200_000)
    monkeypatch.setattr(issuer, "lifetime", 12)
    obj = campaign("tokens-renewed", [src], [dst], file_count=100_000, file_size=200_000, source_file_count=4,
                   source_path="src", checksum_mode="none", tpc_mode="pull", concurrency_steps=[2],
                   step_seconds=22)  # fmt: skip
    before = len(issuer.issued)
    run = drive(obj)
    assert run.state == RunState.SUCCEEDED, run.error
    assert run.files_failed == 0 and run.files_done > 0
    span = (run.finished_at - run.started_at).total_seconds()
    assert span > 20
    # Each endpoint's token renewed when a third of its 12 s was left: asked at 0, ~8 and ~16 s.
    per_endpoint = {}
    for item in issuer.issued[before:]:
        per_endpoint.setdefault(item.scope, []).append(item.issued_at)
    assert len(per_endpoint) == 2
    assert all(len(times) >= 3 for times in per_endpoint.values()), per_endpoint


def test_the_renewal_rule_asks_again_when_a_third_of_the_lifetime_is_left(token_site):
    row = token_site[3]
    now = [1000.0]
    asked: list[float] = []
    failing = [False]

    def fetch(issuer, scope):
        if failing[0]:
            raise tokens.TokenError("issuer down")
        asked.append(now[0])
        return tokens.Token(f"token-{len(asked)}", now[0], 60)

    need = tokens.TokenNeed(1, "davs://door:1094/data/", row.pk, "storage.read:/x")
    held = tokens.RunTokens([need], fetch=fetch, clock=lambda: now[0])
    for need_ in held.needs:  # started by hand: no thread, the test's clock
        held._store(need_, fetch(row, need_.scope))
    assert held.token_for("davs://door:1094/data/x/y") == "token-1" and held.token_for("davs://other/") == ""
    now[0] = 1039.0  # 21 s left of 60: more than a third
    held.renew_due()
    assert asked == [1000.0]
    now[0] = 1040.0  # a third left: renewed
    held.renew_due()
    assert asked == [1000.0, 1040.0] and held.current() == [(need.url, "token-2")] and held.generation == 2
    failing[0], now[0] = True, 1080.0
    held.renew_due()  # the old token still holds; tried again RETRY_SECONDS later, not before
    assert held.failed_renewals == 1 and held.next_renewal() == 1080.0 + tokens.RETRY_SECONDS
    failing[0], now[0] = False, 1080.0 + tokens.RETRY_SECONDS
    held.renew_due()
    assert held.current() == [(need.url, "token-3")] and held.next_renewal() == now[0] + 40


def test_fts_jobs_carry_each_files_tokens_unmanaged():
    from campaigns.runs.engines.copies import CopyJob
    from campaigns.runs.engines.fts.client import JobOptions, job_body

    jobs = [CopyJob(1, 0, "davs://a/data/s/f0", "davs://b/data/runs/run-1/f0", 10, 0, 1)]
    found = {"davs://a/data/": "read-token", "davs://b/data/": "write-token"}
    body = job_body(jobs, JobOptions(), {}, lambda url: next((t for p, t in found.items() if url.startswith(p)), ""))
    assert body["files"][0]["source_tokens"] == ["read-token"]
    assert body["files"][0]["destination_tokens"] == ["write-token"]
    assert body["params"]["unmanaged_tokens"] is True
    assert "unmanaged_tokens" not in job_body(jobs, JobOptions(), {})["params"]


def test_a_client_pool_is_refused_with_endpoints_on_an_issuer(token_site):
    from django.core.exceptions import ValidationError

    from collectors.models import Host

    src, dst = token_endpoints(token_site, "pooled")
    obj = campaign("tokens-pooled", [src], [dst])
    obj.clients.set([Host.objects.create(name="client-1", role="client")])
    with pytest.raises(ValidationError, match="do not reach a client pool"):
        runs.check_runnable(obj)


def test_a_token_the_issuer_refuses_fails_the_run_before_any_copy_with_its_words(token_site):
    row = token_site[3]
    row.client_secret = "not-the-secret"
    row.save()
    src, dst = token_endpoints(token_site, "refused")
    run = drive(campaign("tokens-refused", [src], [dst], file_count=2))
    assert run.state == RunState.FAILED
    why = run.stop_reason
    assert why.startswith("token issuer test-iam refused a token for 'storage.read:/refused/"), why
    assert "HTTP 401 (unknown client or wrong secret)" in why and "not-the-secret" not in why
    assert not Transfer.objects.filter(run=run, state="succeeded").exists()

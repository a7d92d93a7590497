"""Each kind of outbound call, against a server that accepts and never answers, ends within its
deadline and a few seconds, with an error that says so: webhook and SMTP delivery, the FTS REST
client, a node_exporter scrape, and gfal2's namespace calls around a run (stat, checksum,
listing, mkdir, unlink). tests/test_outbound_deadlines.py checks on the source that no call
goes without one."""

from __future__ import annotations

import time

import pytest

from alerts import delivery
from alerts.models import Delivery, Subscription
from campaigns.runs.engines.copies import CopyOptions
from campaigns.runs.engines.fts.client import FtsClient, FtsError, FtsSettings
from campaigns.runs.engines.gfal2.client import Gfal2Copier
from campaigns.runs.executors.copy_threads import GIVE_UP
from campaigns.runs.executors.deadline import DeadlineExceeded
from collectors import node_exporter
from collectors.models import Host
from tests.support.silent_servers import silent_http_server, silent_tcp_server

#: What a call may take past its deadline: a busy machine's scheduling, a thread's start.
SLACK = 3.0


def _timed(call):
    started = time.monotonic()
    try:
        outcome = call()
    except Exception as exc:  # noqa: BLE001 -- the error is the outcome under test
        outcome = exc
    return outcome, time.monotonic() - started


@pytest.mark.django_db
def test_a_webhook_that_never_answers_fails_the_delivery_within_its_deadline():
    with silent_http_server() as server:
        subscription = Subscription.objects.create(name="silent hook", webhook_url=f"{server.url}/hook")
        sent, seconds = _timed(lambda: delivery.send_test(subscription))
        assert server.accepted == 1 and server.received[0].startswith(b"POST /hook")
    assert isinstance(sent, Delivery), sent
    assert sent.state == Delivery.State.FAILED
    assert "timed out" in sent.outcome["webhook"], sent.outcome
    assert delivery.WEBHOOK_TIMEOUT <= seconds < delivery.WEBHOOK_TIMEOUT + SLACK, seconds
    print(f"\nwebhook to a silent HTTP server: failed after {seconds:.1f} s "
          f"(deadline {delivery.WEBHOOK_TIMEOUT:g} s): {sent.outcome['webhook']}")  # fmt: skip


@pytest.mark.django_db
def test_an_smtp_server_that_never_greets_fails_the_delivery_within_its_deadline(settings):
    with silent_tcp_server() as server:
        settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
        settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", server.port
        subscription = Subscription.objects.create(name="silent mail", email="ops@example.org")
        sent, seconds = _timed(lambda: delivery.send_test(subscription))
        assert server.accepted == 1
    assert isinstance(sent, Delivery), sent
    assert sent.state == Delivery.State.FAILED
    assert "timed out" in sent.outcome["email"], sent.outcome
    assert settings.EMAIL_TIMEOUT <= seconds < settings.EMAIL_TIMEOUT + SLACK, seconds
    print(f"\nSMTP to a silent server: failed after {seconds:.1f} s (deadline {settings.EMAIL_TIMEOUT} s): "
          f"{sent.outcome['email']}")  # fmt: skip


def test_an_fts_server_that_never_answers_fails_the_call_within_its_deadline():
    with silent_http_server() as server:
        client_settings = FtsSettings(url=f"{server.url}/fts")
        client = FtsClient(client_settings)
        error, seconds = _timed(lambda: client.submit({"files": []}))
        assert server.received and server.received[0].startswith(b"POST /fts/jobs")
    assert isinstance(error, FtsError), error
    assert "timed out" in str(error), error
    assert client_settings.timeout <= seconds < client_settings.timeout + SLACK, seconds
    print(f"\nFTS REST submit to a silent server: failed after {seconds:.1f} s "
          f"(deadline {client_settings.timeout:g} s): {error}")  # fmt: skip


@pytest.mark.django_db
def test_a_node_exporter_that_never_answers_fails_its_scrape_within_its_deadline():
    with silent_http_server() as server:
        Host.objects.create(name="silent-door", address="127.0.0.1", node_exporter_url=f"{server.url}/metrics")
        results, seconds = _timed(node_exporter.scrape_all)
    assert results["silent-door"].startswith("error: ") and "timed out" in results["silent-door"], results
    assert node_exporter.TIMEOUT <= seconds < node_exporter.TIMEOUT + SLACK, seconds
    print(f"\nnode_exporter scrape of a silent server: failed after {seconds:.1f} s "
          f"(deadline {node_exporter.TIMEOUT:g} s): {results['silent-door']}")  # fmt: skip


GFAL2_TIMEOUT = 4  # the campaign's timeout here: the deadline of every call below


@pytest.mark.parametrize(
    "operation",
    [
        ("stat", lambda copier, url: copier.size_of(url)),
        ("checksum", lambda copier, url: copier.checksum_of(url, "adler32")),
        ("listing", lambda copier, url: copier.list_files(url.rsplit("/", 1)[0])),
        ("unlink", lambda copier, url: copier.remove(url)),
        ("rmdir", lambda copier, url: copier.remove_folder(url.rsplit("/", 1)[0])),
        ("mkdir and write", lambda copier, url: copier.write(url, iter([b"x" * 1024]), 1024)),
    ],
    ids=lambda operation: operation[0],
)
def test_a_door_that_never_answers_ends_each_gfal2_call_around_a_run_within_its_deadline(operation):
    name, call = operation
    copier = Gfal2Copier(CopyOptions(timeout=GFAL2_TIMEOUT))
    with silent_tcp_server() as server:
        url = f"root://127.0.0.1:{server.port}//data/run-1/file-0001"
        error, seconds = _timed(lambda: call(copier, url))
        assert server.accepted >= 1
    assert isinstance(error, DeadlineExceeded), error
    assert f"no answer within StorageOps' {GFAL2_TIMEOUT} s deadline" in str(error), error
    assert GFAL2_TIMEOUT <= seconds < GFAL2_TIMEOUT + GIVE_UP + SLACK, seconds
    print(f"\ngfal2 {name} on a silent door: ended after {seconds:.1f} s (deadline {GFAL2_TIMEOUT} s, "
          f"given up {GIVE_UP:g} s after the cancel at most): {error}")  # fmt: skip

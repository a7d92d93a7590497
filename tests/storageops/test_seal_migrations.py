"""Migrations campaigns 0027 and alerts 0006 seal the secrets stored in the clear before them
(endpoint and FTS bearer tokens, webhook URLs) and, backwards, store them in the clear again.
Run for real (django's MigrationExecutor) from a database at campaigns 0026 and alerts 0005
holding secrets and rows without any; the test leaves the database at the latest migrations.
"""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from storageops.sealed import PREFIX, SecretsKeyError, unseal

pytestmark = pytest.mark.django_db(transaction=True)
BEFORE = [("campaigns", "0026_run_started_by"), ("alerts", "0005_readiness_failed_kind")]
AFTER = [("campaigns", "0027_seal_bearer_tokens"), ("alerts", "0006_seal_webhook_urls")]
HOOK = "https://chat.example.org/hooks/Xk3Pq9sEcReT26characters?channel=storage"
LONGEST_HOOK = "https://chat.example.org/hooks/" + "k" * (500 - 31)


def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def column(table: str, name: str) -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT name, {name} FROM {table} ORDER BY name")  # noqa: S608
        return dict(cursor.fetchall())


def column_type(table: str, name: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT data_type, character_maximum_length FROM information_schema.columns "
            "WHERE table_name = %s AND column_name = %s",
            [table, name],
        )
        kind, length = cursor.fetchone()
    return f"{kind}({length})" if length else kind


@pytest.fixture
def at_0026(settings):
    settings.STORAGEOPS_SECRETS_KEYS = [Fernet.generate_key().decode()]
    apps = migrate(BEFORE)
    try:
        yield apps
    finally:
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())


def test_clear_secrets_are_sealed_forward_and_opened_backward(at_0026, settings):
    apps = at_0026
    backend = apps.get_model("campaigns", "Backend").objects.create(name="eos")
    Endpoint = apps.get_model("campaigns", "Endpoint")
    Endpoint.objects.create(name="tokened", url="davs://door2:2880/data/", backend=backend, bearer_token="ep-token")
    Endpoint.objects.create(name="plain", url="root://door1:1094//data/", backend=backend)
    apps.get_model("campaigns", "FtsInstance").objects.create(
        name="fts", url="https://fts.example.org:8446", bearer_token="fts-token"
    )
    Subscription = apps.get_model("alerts", "Subscription")
    Subscription.objects.create(name="chat", webhook_url=HOOK)
    Subscription.objects.create(name="longest", webhook_url=LONGEST_HOOK)
    Subscription.objects.create(name="mail", email="ops@example.org")
    assert column_type("alerts_subscription", "webhook_url") == "character varying(500)"

    migrate(AFTER)
    tokens = column("campaigns_endpoint", "bearer_token")
    fts = column("campaigns_ftsinstance", "bearer_token")
    hooks = column("alerts_subscription", "webhook_url")
    assert tokens["plain"] == "" and hooks["mail"] == "", "empty stays empty"
    for sealed in (tokens["tokened"], fts["fts"], hooks["chat"], hooks["longest"]):
        assert sealed.startswith(PREFIX)
    assert "token" not in tokens["tokened"] + fts["fts"] and "Xk3Pq9" not in hooks["chat"]
    assert (unseal(tokens["tokened"]), unseal(fts["fts"]), unseal(hooks["chat"])) == ("ep-token", "fts-token", HOOK)
    # A URL of the 500 characters allowed is longer than that sealed: the column is text now.
    assert column_type("alerts_subscription", "webhook_url") == "text" and len(hooks["longest"]) > 500
    from alerts.models import Subscription as Live

    assert Live.objects.get(name="longest").webhook_url == LONGEST_HOOK

    # Backwards the key is needed to open them: without it nothing is changed.
    keys = settings.STORAGEOPS_SECRETS_KEYS
    settings.STORAGEOPS_SECRETS_KEYS = []
    with pytest.raises(SecretsKeyError, match="must be opened, but no key"):
        migrate([BEFORE[0]])
    assert column("campaigns_endpoint", "bearer_token")["tokened"] == tokens["tokened"]
    settings.STORAGEOPS_SECRETS_KEYS = keys

    migrate(BEFORE)
    assert column("campaigns_endpoint", "bearer_token") == {"plain": "", "tokened": "ep-token"}
    assert column("campaigns_ftsinstance", "bearer_token") == {"fts": "fts-token"}
    assert column("alerts_subscription", "webhook_url") == {"chat": HOOK, "longest": LONGEST_HOOK, "mail": ""}
    assert column_type("alerts_subscription", "webhook_url") == "character varying(500)"


def test_a_database_without_secrets_migrates_both_ways_without_a_key(at_0026, settings):
    settings.STORAGEOPS_SECRETS_KEYS = []
    apps = at_0026
    backend = apps.get_model("campaigns", "Backend").objects.create(name="eos")
    apps.get_model("campaigns", "Endpoint").objects.create(name="plain", url="root://d:1094//x/", backend=backend)
    migrate(AFTER)
    migrate(BEFORE)
    migrate(AFTER)
    assert column("campaigns_endpoint", "bearer_token") == {"plain": ""}

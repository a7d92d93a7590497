"""Secrets sealed at rest (storageops.sealed): the database holds only sealed text, the
application reads the clear text; no key, a wrong key or a bad key is an error that says what
to do; rotate_secrets_key moves every secret to the first key, after which the old one goes."""

from __future__ import annotations

import io
import os
import stat
import subprocess

import pytest
from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection, transaction

from alerts.models import Subscription
from campaigns.models import Endpoint
from campaigns.runs.engines.fts.models import FtsInstance
from devsite.services import secrets_key_env
from storageops.env import env_fernet_keys
from storageops.sealed import PREFIX, SecretsKeyError, sealed_fields
from tests.support.factories import endpoint
from tests.support.processes import PYTHON, ROOT

pytestmark = pytest.mark.django_db

TOKEN = "eyJhbGciOiJSUzI1NiJ9.endpoint-secret"
HOOK = "https://chat.example.org/hooks/Xk3Pq9sEcReT26characters"


def stored(model, pk, column: str) -> str:
    """The value as the database holds it, read past the ORM."""
    table = connection.ops.quote_name(model._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {connection.ops.quote_name(column)} FROM {table} WHERE id = %s", [pk])  # noqa: S608
        return cursor.fetchone()[0]


@pytest.fixture
def one_key(settings):
    settings.STORAGEOPS_SECRETS_KEYS = [Fernet.generate_key().decode()]
    return settings


def test_the_database_holds_sealed_text_and_the_application_the_clear(one_key):
    ep = endpoint("tokened", "davs://door2:2880/data/", bearer_token=TOKEN)
    raw = stored(Endpoint, ep.pk, "bearer_token")
    assert raw.startswith(PREFIX) and TOKEN not in raw
    assert Endpoint.objects.get(pk=ep.pk).bearer_token == TOKEN
    assert Endpoint.objects.values_list("bearer_token", flat=True).get(pk=ep.pk) == TOKEN
    # Each saving seals anew: two saves of one token do not give one text to compare.
    ep.save()
    assert stored(Endpoint, ep.pk, "bearer_token") != raw
    sub = Subscription.objects.create(name="chat", webhook_url=HOOK)
    assert "Xk3Pq9" not in stored(Subscription, sub.pk, "webhook_url")
    assert Subscription.objects.get(pk=sub.pk).webhook_url == HOOK
    # The empty ones stay empty, and are found as such.
    plain = endpoint("plain", "root://door1:1094//data/")
    assert stored(Endpoint, plain.pk, "bearer_token") == ""
    assert set(Endpoint.objects.filter(bearer_token="").values_list("name", flat=True)) == {"plain"}


def test_every_secret_field_is_sealed():
    found = {f"{model._meta.label}.{field.name}" for model, field in sealed_fields()}
    assert found == {"alerts.Subscription.webhook_url", "campaigns.Endpoint.bearer_token",
                     "fts.FtsInstance.bearer_token", "campaigns.TokenIssuer.client_secret"}  # fmt: skip


def test_a_webhook_url_keeps_its_one_line_input_and_its_length_bound(one_key):
    from alerts.forms import SubscriptionForm

    field = SubscriptionForm().fields["webhook_url"]
    assert field.max_length == 500 and field.widget.input_type == "text"
    form = SubscriptionForm(data={"name": "long", "kinds": ["regression"], "webhook_url": HOOK + "x" * 500,
                                  "min_interval_minutes": 30, "repeat_ongoing_hours": 24})  # fmt: skip
    assert not form.is_valid() and "webhook_url" in form.errors


def test_no_key_is_needed_without_secrets_and_named_when_one_is(settings):
    settings.STORAGEOPS_SECRETS_KEYS = []
    plain = endpoint("plain", "root://door1:1094//data/")
    assert Endpoint.objects.get(pk=plain.pk).bearer_token == ""
    with pytest.raises(SecretsKeyError) as refused, transaction.atomic():
        endpoint("tokened", "davs://door2:2880/data/", bearer_token=TOKEN)
    message = str(refused.value)
    assert "campaigns.Endpoint.bearer_token must be sealed" in message
    for hint in ("STORAGEOPS_SECRETS_KEY", "STORAGEOPS_SECRETS_KEY_FILE", "manage.py make_secrets_key",
                 "Fernet.generate_key()"):  # fmt: skip
        assert hint in message
    assert not Endpoint.objects.filter(name="tokened").exists()
    # Stored with a key, read without one: refused too, never the sealed text taken for the token.
    settings.STORAGEOPS_SECRETS_KEYS = [Fernet.generate_key().decode()]
    fts = FtsInstance.objects.create(name="fts", url="https://fts.example.org:8446", bearer_token=TOKEN)
    settings.STORAGEOPS_SECRETS_KEYS = []
    with pytest.raises(SecretsKeyError, match=r"fts.FtsInstance.bearer_token must be opened, but no key"):
        FtsInstance.objects.get(pk=fts.pk)


def test_a_wrong_key_is_refused_with_what_to_do(one_key):
    ep = endpoint("tokened", "davs://door2:2880/data/", bearer_token=TOKEN)
    one_key.STORAGEOPS_SECRETS_KEYS = [Fernet.generate_key().decode()]
    with pytest.raises(SecretsKeyError) as refused:
        Endpoint.objects.get(pk=ep.pk)
    message = str(refused.value)
    assert "campaigns.Endpoint.bearer_token is sealed with a key that is not among the 1 key(s)" in message
    assert "rotate_secrets_key" in message and PREFIX not in message


def test_values_stored_before_sealing_are_read_as_they_are(one_key):
    ep = endpoint("legacy", "davs://door2:2880/data/")
    with connection.cursor() as cursor:
        cursor.execute("UPDATE campaigns_endpoint SET bearer_token = %s WHERE id = %s", [TOKEN, ep.pk])
    assert Endpoint.objects.get(pk=ep.pk).bearer_token == TOKEN


def test_the_change_log_never_holds_a_sealed_field(one_key):
    from storageops.changelog import snapshot

    sub = Subscription.objects.create(name="chat", webhook_url=HOOK)
    assert snapshot(sub)["webhook_url"] == "(secret)"


def test_rotation_moves_every_secret_to_the_first_key_and_the_old_one_can_go(one_key):
    old = one_key.STORAGEOPS_SECRETS_KEYS[0]
    ep = endpoint("tokened", "davs://door2:2880/data/", bearer_token=TOKEN)
    fts = FtsInstance.objects.create(name="fts", url="https://fts.example.org:8446", bearer_token="fts-" + TOKEN)
    sub = Subscription.objects.create(name="chat", webhook_url=HOOK)
    endpoint("plain", "root://door1:1094//data/")
    # One stored before sealing (a row restored from an old backup): sealed by the rotation too.
    legacy = endpoint("legacy", "davs://door3:2880/data/")
    with connection.cursor() as cursor:
        cursor.execute("UPDATE campaigns_endpoint SET bearer_token = 'legacy-token' WHERE id = %s", [legacy.pk])
    new = Fernet.generate_key().decode()
    one_key.STORAGEOPS_SECRETS_KEYS = [new, old]
    out = io.StringIO()
    call_command("rotate_secrets_key", stdout=out)
    report = out.getvalue()
    assert "campaigns.Endpoint.bearer_token: 1 sealed again, 1 sealed that were in the clear." in report
    assert "fts.FtsInstance.bearer_token: 1 sealed again." in report
    assert "alerts.Subscription.webhook_url: 1 sealed again." in report
    assert "the others may be removed" in report
    one_key.STORAGEOPS_SECRETS_KEYS = [new]
    assert Endpoint.objects.get(pk=ep.pk).bearer_token == TOKEN
    assert Endpoint.objects.get(pk=legacy.pk).bearer_token == "legacy-token"
    assert FtsInstance.objects.get(pk=fts.pk).bearer_token == "fts-" + TOKEN
    assert Subscription.objects.get(pk=sub.pk).webhook_url == HOOK
    assert stored(Endpoint, legacy.pk, "bearer_token").startswith(PREFIX)
    # And the old key alone opens nothing any more.
    one_key.STORAGEOPS_SECRETS_KEYS = [old]
    with pytest.raises(SecretsKeyError):
        Endpoint.objects.get(pk=ep.pk)


def test_rotation_stops_on_a_value_no_key_opens_unless_told_to_empty_it(one_key):
    lost = endpoint("lost", "davs://door2:2880/data/", bearer_token=TOKEN)
    one_key.STORAGEOPS_SECRETS_KEYS = [Fernet.generate_key().decode()]
    kept = endpoint("kept", "davs://door3:2880/data/", bearer_token="kept-token")
    before = stored(Endpoint, kept.pk, "bearer_token")
    with pytest.raises(CommandError, match=r"campaigns.Endpoint.bearer_token of endpoint #\d+ is sealed with a key"):
        call_command("rotate_secrets_key", stdout=io.StringIO())
    assert stored(Endpoint, kept.pk, "bearer_token") == before, "nothing changed"
    out = io.StringIO()
    call_command("rotate_secrets_key", "--clear-unreadable", stdout=out)
    assert f"Emptied campaigns.Endpoint.bearer_token of endpoint #{lost.pk}: no key opens it" in out.getvalue()
    assert Endpoint.objects.get(pk=lost.pk).bearer_token == ""
    assert Endpoint.objects.get(pk=kept.pk).bearer_token == "kept-token"


def test_make_secrets_key_prints_a_key_the_settings_take(monkeypatch):
    out = io.StringIO()
    call_command("make_secrets_key", stdout=out)
    key = out.getvalue().strip()
    monkeypatch.delenv("STORAGEOPS_SECRETS_KEY_FILE", raising=False)
    monkeypatch.setenv("STORAGEOPS_SECRETS_KEY", f"{key}, {Fernet.generate_key().decode()}")
    assert env_fernet_keys("STORAGEOPS_SECRETS_KEY")[0] == key
    Fernet(key.encode())


def test_keys_from_the_variable_or_a_file_and_bad_ones_named_not_shown(monkeypatch, tmp_path):
    first, second = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    monkeypatch.delenv("STORAGEOPS_SECRETS_KEY_FILE", raising=False)
    monkeypatch.setenv("STORAGEOPS_SECRETS_KEY", f"{first},{second}")
    assert env_fernet_keys("STORAGEOPS_SECRETS_KEY") == [first, second]
    keys = tmp_path / "secrets.key"
    keys.write_text(f"# the new one first\n{second}\n\n{first}\n")
    monkeypatch.setenv("STORAGEOPS_SECRETS_KEY_FILE", str(keys))
    assert env_fernet_keys("STORAGEOPS_SECRETS_KEY") == [second, first], "the file wins, as for env_secret"
    keys.write_text(f"{second}\nnot-a-key-but-secret-text\n")
    with pytest.raises(ImproperlyConfigured) as refused:
        env_fernet_keys("STORAGEOPS_SECRETS_KEY")
    assert f"STORAGEOPS_SECRETS_KEY_FILE={str(keys)!r}: key 2 of 2 is not a Fernet key" in str(refused.value)
    assert "secret-text" not in str(refused.value)
    monkeypatch.setenv("STORAGEOPS_SECRETS_KEY_FILE", str(tmp_path / "missing"))
    with pytest.raises(ImproperlyConfigured, match=r"STORAGEOPS_SECRETS_KEY_FILE=.* cannot be read"):
        env_fernet_keys("STORAGEOPS_SECRETS_KEY")


def test_a_bad_key_stops_start_up(tmp_path):
    env = {**os.environ, "DATABASE_URL": "postgres://u@127.0.0.1:1/db", "CELERY_BROKER_URL": "redis://127.0.0.1:1/0",
           "STORAGEOPS_VAR_DIR": str(tmp_path), "STORAGEOPS_SECRETS_KEY": "short"}  # fmt: skip
    env.pop("STORAGEOPS_SECRETS_KEY_FILE", None)
    done = subprocess.run([PYTHON, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode != 0
    assert "STORAGEOPS_SECRETS_KEY: key 1 of 1 is not a Fernet key" in done.stderr


def test_the_launcher_makes_one_private_key_when_none_is_given(tmp_path):
    var = tmp_path / "var"
    env = secrets_key_env(var, environ={})
    path = var / "secrets.key"
    assert env == {"STORAGEOPS_SECRETS_KEY_FILE": str(path)}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    key = path.read_text()
    Fernet(key.strip().encode())
    assert secrets_key_env(var, environ={}) == env and path.read_text() == key, "made once, then kept"
    assert [p.name for p in var.iterdir()] == ["secrets.key"]
    # A key given is used as it is, and nothing is made for it.
    assert secrets_key_env(tmp_path / "other", environ={"STORAGEOPS_SECRETS_KEY": key.strip()}) == {}
    assert secrets_key_env(tmp_path / "other", environ={"STORAGEOPS_SECRETS_KEY_FILE": "/etc/k"}) == {}
    assert not (tmp_path / "other").exists()

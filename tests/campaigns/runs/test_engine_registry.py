"""The engine registry (campaigns.models.engine_registry): every engine-specific choice is asked
of it, and nothing outside it and the engines' own packages compares engine names.

The contract tests (test_engine_contract.py) drive runs through every registered engine; these
check the registry's own rules and the source of the project.
"""

from __future__ import annotations

import ast
from importlib import import_module
from pathlib import Path

import pytest
from django.apps import apps
from django.core.exceptions import ValidationError

from campaigns.models import engine_registry
from campaigns.models.engine_rules import client_pool_error
from campaigns.runs.engines.fts.models import FtsInstance
from campaigns.runs.starting import check_runnable
from tests.support.api import api
from tests.support.factories import mock_campaign
from tests.support.toy_engine import ENTRY as TOY
from tests.support.toy_engine import toy_engine_registered

ROOT = Path(__file__).resolve().parents[3]
ENGINES_ROOT = "campaigns/runs/engines/"
# The engines' apps, in INSTALLED_APPS order (the order the forms offer them): each registers
# its engine module when ready.
ENGINE_APPS = [c.name for c in apps.get_app_configs() if c.name.startswith("campaigns.runs.engines.")]
ENGINE_MODULES = tuple(f"{name}.engine" for name in ENGINE_APPS)
# The shipped engines' names: a new engine's package joins them through the registry alone.
ENGINE_NAMES = frozenset(import_module(module).NAME for module in ENGINE_MODULES)
# Engine names that are not a choice between engines, with the reason.
ALLOWED = {
    ("campaigns/runs/versions.py", "gfal2"): "the gfal2 library's version, recorded for every run",
}


def _constants(node: ast.AST) -> set[str]:
    return {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def engine_choices_in(path: Path, root: Path = ROOT) -> list[str]:
    """Comparisons with an engine name, dict keys that are engine names, and `Engine.X`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        named: set[str] = set()
        if isinstance(node, ast.Compare):
            named = _constants(node) & ENGINE_NAMES
        elif isinstance(node, ast.Dict):
            named = {k.value for k in node.keys if isinstance(k, ast.Constant)} & ENGINE_NAMES
        elif isinstance(node, ast.MatchValue):
            named = _constants(node) & ENGINE_NAMES
        elif isinstance(node, ast.Attribute) and "Engine" in (
            getattr(node.value, "id", ""),
            getattr(node.value, "attr", ""),
        ):
            named = {f"Engine.{node.attr}"}
        found += [f"{path.relative_to(root)}:{node.lineno}: {name}" for name in sorted(named)]
    return found


def _engine_place(relative: str) -> bool:
    """Where engine names may be compared: the registry and each engine's own package."""
    return relative == "campaigns/models/engine_registry.py" or (
        relative.startswith(ENGINES_ROOT) and "/" in relative.removeprefix(ENGINES_ROOT)
    )


def test_no_engine_is_chosen_by_name_outside_the_registry_and_its_own_package():
    found = []
    for path in sorted((ROOT / "campaigns").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if "/migrations/" in relative or _engine_place(relative):
            continue
        found += [f for f in engine_choices_in(path) if (relative, f.rpartition(": ")[2]) not in ALLOWED]
    for path in sorted((ROOT / "templates").rglob("*.html")):
        text = path.read_text()
        found += [f"{path.relative_to(ROOT)}: {n}" for n in ENGINE_NAMES if f'engine == "{n}"' in text]
    assert not found, "engine choices outside the registry (ask campaigns.models.engine_registry):\n" + "\n".join(found)


def test_the_engine_check_sees_a_comparison(tmp_path):
    # Guards the test above against passing because it cannot see one.
    sample = tmp_path / "sample.py"
    sample.write_text('x = campaign.engine == "fts"\ny = {"gfal2": 1}\nz = choices.Engine.FTS\n')
    found = engine_choices_in(sample, tmp_path)
    assert [f.rpartition(": ")[2] for f in found] == ["fts", "gfal2", "Engine.FTS"], found


def test_the_shipped_engines_are_registered_when_the_app_is_ready():
    # In the order INSTALLED_APPS names their apps (the order the forms offer them).
    assert list(engine_registry.registered()) == [import_module(module).ENTRY for module in ENGINE_MODULES]
    assert {"gfal2", "fts"} <= ENGINE_NAMES
    assert engine_registry.drive_task("gfal2") == "campaigns.drive_run"
    assert engine_registry.drive_task("fts") == "campaigns.drive_fts_run"
    # A run of an engine this deployment no longer has goes to the default task, which fails it.
    assert engine_registry.drive_task("gone") == "campaigns.drive_run"
    with pytest.raises(LookupError, match="No engine 'gone' is registered"):
        engine_registry.engine("gone")


def test_a_name_is_registered_once_and_fits_the_engine_column():
    with toy_engine_registered():
        engine_registry.register_engine(TOY)  # the same entry again: an import twice, harmless
        with pytest.raises(ValueError, match="registered already"):
            engine_registry.register_engine(engine_registry.EngineEntry("toy", "Other", build_executor=print))
    with pytest.raises(ValueError, match="10 characters"):
        engine_registry.register_engine(engine_registry.EngineEntry("much-too-long", "x", build_executor=print))
    assert "toy" not in {e.name for e in engine_registry.registered()}


@pytest.mark.django_db
def test_a_campaign_may_name_only_a_registered_engine():
    campaign = mock_campaign("registry-toy")
    campaign.engine = "toy"
    with pytest.raises(ValidationError) as refused:
        campaign.full_clean()
    assert "engine" in refused.value.message_dict
    with toy_engine_registered():
        campaign.full_clean()
        assert campaign.get_engine_display() == "Toy"


@pytest.mark.django_db
def test_the_fts_entry_says_what_an_fts_campaign_may_not_ask_for():
    campaign = mock_campaign("registry-fts", engine="gfal2", tpc_mode="streamed", start_together=True)
    campaign.engine = "fts"
    with pytest.raises(ValidationError) as refused:
        campaign.full_clean()
    assert set(refused.value.message_dict) == {"tpc_mode", "start_together", "engine_options"}
    campaign.tpc_mode, campaign.start_together = "auto", False
    instance = FtsInstance.objects.create(name="registry-fts", url="https://fts.example.org:8446")
    campaign.engine_options = {"instance": str(instance.pk), "strict_copy": "true"}
    campaign.full_clean()
    assert campaign.engine_options == {"instance": instance.pk, "priority": 3, "strict_copy": True, "measure_files": 0}
    check_runnable(campaign)
    # The snapshot freezes how the instance was reached, beside the parameters.
    extras = engine_registry.engine("fts").snapshot_extras(campaign)
    assert extras["fts"]["url"] == "https://fts.example.org:8446" and "bearer_token" not in extras["fts"]
    assert engine_registry.engine("gfal2").snapshot_extras(campaign) == {}


def test_a_client_pool_is_refused_for_an_engine_that_copies_on_its_own_nodes():
    class Client:
        role = "client"
        name = "c1"

    assert "FTS3 runs the copies on its own nodes" in client_pool_error("fts", [Client()])
    assert client_pool_error("gfal2", [Client()]) is None
    with toy_engine_registered():
        assert client_pool_error("toy", [Client()]) is None


def test_every_engine_maps_its_errors_onto_the_shared_categories():
    with toy_engine_registered():
        mapped = {e.name: e.categorize(125, "Transfer canceled by the user") for e in engine_registry.registered()}
    assert mapped == dict.fromkeys([*ENGINE_NAMES, "toy"], "cancelled")


@pytest.mark.django_db
def test_the_api_takes_engine_options_and_names_them_to_a_client_sending_the_old_fields(admin_user):
    client = api(admin_user, "admin")
    made_for = mock_campaign("api-src")
    source, destination = made_for.sources.get(), made_for.destinations.get()
    instance = FtsInstance.objects.create(name="api-fts", url="https://fts.example.org:8446")
    body = {"name": "api-fts", "sources": [source.pk], "destinations": [destination.pk], "engine": "fts",
            "tpc_mode": "auto"}  # fmt: skip

    old = client.post("/api/v1/campaigns/", {**body, "fts_instance": instance.pk, "fts_priority": 4}, format="json")
    assert old.status_code == 400, old.content
    fields = old.json()["error"]["fields"]
    assert fields["fts_instance"] == ['Moved into engine_options: send "engine_options": {"instance": ...}.']
    assert fields["fts_priority"] == ['Moved into engine_options: send "engine_options": {"priority": ...}.']

    missing = client.post("/api/v1/campaigns/", {**body, "engine_options": {"instance": 999_999}}, format="json")
    assert missing.status_code == 400
    assert missing.json()["error"]["fields"]["engine_options"] == ["instance: There is no FTS instance with this id."]

    made = client.post("/api/v1/campaigns/", {**body, "engine_options": {"instance": instance.pk}}, format="json")
    assert made.status_code == 201, made.content
    assert made.json()["engine_options"] == {
        "instance": instance.pk,
        "priority": 3,
        "strict_copy": False,
        "measure_files": 0,
    }
    # In use: deleting the instance is refused (409), as the foreign key's PROTECT did.
    assert client.delete(f"/api/v1/fts-instances/{instance.pk}/").status_code == 409
    assert FtsInstance.objects.filter(pk=instance.pk).exists()

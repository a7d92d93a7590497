"""Migration campaigns 0016 moves FTS options from Campaign's fts_* columns into engine_options,
with the data: run from a database at 0015 holding FTS and gfal2 campaigns, then back.

The schema is migrated for real (django's MigrationExecutor) on the test database; the test
leaves it at the latest migration, as it found it.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)
BEFORE = [("campaigns", "0015_campaign_engine_from_registry")]
AFTER = [("campaigns", "0016_engine_options")]


def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.fixture
def at_0015():
    apps = migrate(BEFORE)
    try:
        yield apps
    finally:
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())


def test_fts_options_move_into_engine_options_and_back(at_0015):
    apps = at_0015
    FtsInstance = apps.get_model("campaigns", "FtsInstance")
    Campaign = apps.get_model("campaigns", "Campaign")
    instance = FtsInstance.objects.create(name="old-fts", url="https://fts.example.org:8446")
    Campaign.objects.create(name="fts-set", engine="fts", fts_instance=instance, fts_priority=5, fts_strict_copy=True)
    Campaign.objects.create(name="fts-bare", engine="fts")  # saved before the instance was required
    Campaign.objects.create(name="gfal2-left", engine="gfal2", fts_instance=instance, fts_priority=2)

    apps = migrate(AFTER)
    options = dict(apps.get_model("campaigns", "Campaign").objects.values_list("name", "engine_options"))
    assert options == {
        "fts-set": {"instance": instance.pk, "priority": 5, "strict_copy": True},
        "fts-bare": {"priority": 3, "strict_copy": False},
        # gfal2 takes no options: what its unused FTS columns held is not carried over.
        "gfal2-left": {},
    }
    columns = {
        c.name for c in connection.introspection.get_table_description(connection.cursor(), "campaigns_campaign")
    }
    assert "engine_options" in columns and not {"fts_instance_id", "fts_priority", "fts_strict_copy"} & columns

    apps = migrate(BEFORE)
    back = apps.get_model("campaigns", "Campaign").objects.order_by("name")
    assert [(c.name, c.fts_instance_id, c.fts_priority, c.fts_strict_copy) for c in back] == [
        ("fts-bare", None, 3, False),
        ("fts-set", instance.pk, 5, True),
        ("gfal2-left", None, 3, False),
    ]

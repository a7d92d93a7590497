"""Migration campaigns 0026 names who started the runs recorded before it: the user the web or
the API recorded (created_by, now started_by), and for a scheduled run the schedule its start
event names. Run from a database at 0025, on the test database, which it leaves at the latest
migration as it found it.
"""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)
BEFORE = [("campaigns", "0025_campaign_regression_threshold")]
AFTER = [("campaigns", "0026_run_started_by")]


def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.fixture
def at_0025():
    apps = migrate(BEFORE)
    try:
        yield apps
    finally:
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())


def test_earlier_runs_get_their_users_name_and_their_schedule(at_0025):
    apps = at_0025
    user = apps.get_model("auth", "User").objects.create(username="olaf-earlier")
    campaign = apps.get_model("campaigns", "Campaign").objects.create(name="earlier")
    Run = apps.get_model("campaigns", "Run")
    by_hand = Run.objects.create(campaign=campaign, trigger="web", created_by=user)
    scheduled = Run.objects.create(campaign=campaign, trigger="schedule")
    by_command = Run.objects.create(campaign=campaign, trigger="command")
    Event = apps.get_model("collectors", "Event")
    Event.objects.create(kind="schedule", summary="Scheduled start", run_id=scheduled.pk,
                         detail=json.dumps({"schedule": 7, "reason": "started"}))  # fmt: skip
    # Logged through the API by hand: not a schedule's decision, and says nothing of one.
    Event.objects.create(kind="schedule", summary="note", run_id=by_command.pk, detail="not json")

    apps = migrate(AFTER)
    named = dict(apps.get_model("campaigns", "Run").objects.values_list("pk", "started_by_name"))
    assert named == {by_hand.pk: "olaf-earlier", scheduled.pk: "schedule #7", by_command.pk: ""}
    assert apps.get_model("campaigns", "Run").objects.get(pk=by_hand.pk).started_by_id == user.pk

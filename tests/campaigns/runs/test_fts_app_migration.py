"""FTS becomes an app of its own: campaigns 0029 and fts 0001 move FtsInstance and FtsLinkLimit
to it without touching their tables, fts 0002 copies Transfer's FTS ids into FtsTransfer and
campaigns 0030 drops the columns. Run from a database at campaigns 0028 holding FTS rows, then
back: every row, id and link survives both ways.

The schema is migrated for real (django's MigrationExecutor) on the test database; the test
leaves it at the latest migration, as it found it.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)
BEFORE = [("campaigns", "0028_token_issuers")]
AFTER = [("campaigns", "0030_transfer_fts_ids_move_to_the_fts_app"), ("fts", "0002_ftstransfer")]
# index -> (fts_job_id, fts_file_id) as Transfer held them; index 3 was never handed to FTS.
IDS = {0: ("job-a", 11), 1: ("job-a", 12), 2: ("job-b", None), 3: ("", None)}


def migrate(targets):
    """Migrate to `targets`; the historical models there, with the content types and the change
    log (apps the move relabels, which `targets` do not depend on) at their latest."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    beside = [key for key in executor.loader.graph.leaf_nodes() if key[0] in ("contenttypes", "storageops")]
    return executor.loader.project_state([*targets, *beside]).apps


def transfer_columns() -> set[str]:
    with connection.cursor() as cursor:
        return {c.name for c in connection.introspection.get_table_description(cursor, "campaigns_transfer")}


@pytest.fixture
def at_0028():
    apps = migrate(BEFORE)
    try:
        yield apps
    finally:
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())


def fill(apps) -> dict:
    get = apps.get_model
    backend = get("campaigns", "Backend").objects.create(name="eos")
    src = get("campaigns", "Endpoint").objects.create(name="src", url="root://a.test//d/", backend=backend)
    dst = get("campaigns", "Endpoint").objects.create(name="dst", url="root://b.test//d/", backend=backend)
    instance = get("campaigns", "FtsInstance").objects.create(
        name="site-fts", url="https://fts.example.org:8446", bearer_token="fts-token", files_per_job=7
    )
    campaign = get("campaigns", "Campaign").objects.create(
        name="c", engine="fts", engine_options={"instance": instance.pk}, file_count=4, file_size=1000
    )
    campaign.sources.add(src)
    campaign.destinations.add(dst)
    run = get("campaigns", "Run").objects.create(campaign=campaign)
    for index, (job_id, file_id) in IDS.items():
        get("campaigns", "Transfer").objects.create(
            run=run, index=index, source=f"root://a.test//d/{index}", destination=f"root://b.test//d/{index}",
            source_endpoint=src, destination_endpoint=dst, size=1000, fts_job_id=job_id, fts_file_id=file_id,
        )  # fmt: skip
    limit = get("campaigns", "FtsLinkLimit").objects.create(
        run=run, symbolicname="a-b", source_se="root://a.test", dest_se="root://b.test",
        previous={"max_active": 10}, applied={"min_active": 4, "max_active": 4}, changed_at="2026-11-28T12:00Z",
    )  # fmt: skip
    get("storageops", "ChangeRecord").objects.create(
        via="web", action="create", object_type="campaigns.ftsinstance", object_id=instance.pk, object_repr="site-fts"
    )
    content_type = get("contenttypes", "ContentType").objects.get_or_create(app_label="campaigns", model="ftsinstance")
    return {"run": run.pk, "instance": instance.pk, "limit": limit.pk, "content_type": content_type[0].pk}


def instance_and_limit(apps, label: str) -> tuple:
    instance = apps.get_model(label, "FtsInstance").objects.get()
    limit = apps.get_model(label, "FtsLinkLimit").objects.get()
    return (
        (instance.pk, instance.name, instance.url, instance.bearer_token, instance.files_per_job),
        (limit.pk, limit.run_id, limit.symbolicname, limit.previous, limit.applied),
    )


def test_fts_models_and_transfer_ids_move_to_the_fts_app_and_back(at_0028):
    made = fill(at_0028)
    before = instance_and_limit(at_0028, "campaigns")
    assert before[0][3] == "fts-token"

    apps = migrate(AFTER)
    # Transfer's columns went into FtsTransfer: one row per transfer FTS had, none for the other.
    moved = apps.get_model("fts", "FtsTransfer").objects.values_list("transfer__index", "job_id", "file_id")
    assert sorted(moved) == [(i, job, file) for i, (job, file) in IDS.items() if job]
    assert not {"fts_job_id", "fts_file_id"} & transfer_columns()
    # The instance and its run's link limit are the same rows, now the FTS app's.
    assert instance_and_limit(apps, "fts") == before
    content_type = apps.get_model("contenttypes", "ContentType").objects.get(pk=made["content_type"])
    assert (content_type.app_label, content_type.model) == ("fts", "ftsinstance")
    record = apps.get_model("storageops", "ChangeRecord").objects.get(object_id=made["instance"])
    assert record.object_type == "fts.ftsinstance"

    apps = migrate(BEFORE)
    restored = apps.get_model("campaigns", "Transfer").objects.filter(run_id=made["run"]).order_by("index")
    assert {t.index: (t.fts_job_id, t.fts_file_id) for t in restored} == IDS
    assert instance_and_limit(apps, "campaigns") == before
    content_type = apps.get_model("contenttypes", "ContentType").objects.get(pk=made["content_type"])
    assert content_type.app_label == "campaigns"
    assert apps.get_model("storageops", "ChangeRecord").objects.get().object_type == "campaigns.ftsinstance"

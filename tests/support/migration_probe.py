"""Run in a process of its own against a scratch database (DATABASE_URL): `old` builds the
schema of main before the squash (campaigns 0014, collectors 0004, alerts 0003, storageops 0002,
the replaced migrations themselves) and puts data in with the historical models; `forward`
migrates to the latest and prints what survived, as JSON."""

from __future__ import annotations

import json
import os
import sys

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "storageops.settings")
django.setup()

from django.db import connection  # noqa: E402
from django.db.migrations.executor import MigrationExecutor  # noqa: E402
from django.db.migrations.loader import MigrationLoader  # noqa: E402
from django.utils import timezone  # noqa: E402

TODAY = {
    "campaigns": "0014_run_baseline_choice",
    "collectors": "0004_host_client_role_and_weight",
    "alerts": "0003_scrub_recorded_webhook_secrets",
    "storageops": "0002_roles",
    # The FTS app came later (its models were campaigns' then): none of its migrations.
    "fts": None,
}


def old() -> None:
    executor = MigrationExecutor(connection)
    # The graph with the replaced migrations: a database made before the squash.
    executor.loader = MigrationLoader(connection, replace_migrations=False)
    # collectors 0001 named campaigns 0001 as a dependency until the squash took it out: put the
    # edge back, so the schema is built in main's order (Event's foreign keys need campaigns').
    executor.loader.graph.add_dependency(None, ("collectors", "0001_initial"), ("campaigns", "0001_initial"))
    others = [key for key in executor.loader.graph.leaf_nodes() if key[0] not in TODAY]
    targets = [*TODAY.items(), *others]
    executor.migrate(targets)
    apps = executor.loader.project_state([key for key in targets if key[1] is not None]).apps
    get = apps.get_model
    host = get("collectors", "Host").objects.create(name="door1")
    backend = get("campaigns", "Backend").objects.create(name="eos")
    src = get("campaigns", "Endpoint").objects.create(name="src", url="root://a.test//d/", backend=backend)
    dst = get("campaigns", "Endpoint").objects.create(name="dst", url="root://b.test//d/", backend=backend)
    dst.hosts.add(host)
    campaign = get("campaigns", "Campaign").objects.create(
        name="c", file_count=2, file_size=1000, concurrency_steps=[2], checksum_mode="none"
    )
    campaign.sources.add(src)
    campaign.destinations.add(dst)
    run = get("campaigns", "Run").objects.create(campaign=campaign)
    for i in range(2):
        get("campaigns", "Transfer").objects.create(
            run=run, index=i, source=f"root://a.test//d/{i}", destination=f"root://b.test//d/{i}",
            source_endpoint=src, destination_endpoint=dst, size=1000,
        )  # fmt: skip
    Event = get("collectors", "Event")
    events = [
        Event.objects.create(kind="note", summary="all four", host=host, backend=backend, endpoint=dst, run=run),
        Event.objects.create(kind="run_start", summary="run only", run=run, time=timezone.now()),
    ]
    subscription = get("alerts", "Subscription").objects.create(name="team", campaign=campaign, email="t@x.org")
    print(json.dumps({
        "host": host.pk, "backend": backend.pk, "endpoints": [src.pk, dst.pk], "campaign": campaign.pk,
        "run": run.pk, "events": [e.pk for e in events], "subscription": subscription.pk,
    }))  # fmt: skip


def forward() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    from alerts.models import Subscription
    from campaigns.models import Campaign, Endpoint, Run, Transfer
    from collectors.models import Event

    run = Run.objects.get()
    after = MigrationExecutor(connection)  # a loader that sees what was applied
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, Event._meta.db_table)
    print(json.dumps({
        "events": list(Event.objects.order_by("pk").values("pk", "host_id", "backend_id", "endpoint_id", "run_id")),
        "transfers": Transfer.objects.filter(run=run).count(),
        "campaign_endpoints": [list(Campaign.objects.get().sources.values_list("pk", flat=True)),
                               list(Campaign.objects.get().destinations.values_list("pk", flat=True))],
        "endpoint_hosts": {e.pk: list(e.hosts.values_list("pk", flat=True)) for e in Endpoint.objects.all()},
        "subscription_campaign": Subscription.objects.get().campaign_id,
        "event_foreign_keys": sorted(c["columns"][0] for c in constraints.values() if c["foreign_key"]),
        "unapplied": [str(m) for m, _ in after.migration_plan(after.loader.graph.leaf_nodes())],
    }))  # fmt: skip


if __name__ == "__main__":
    {"old": old, "forward": forward}[sys.argv[1]]()

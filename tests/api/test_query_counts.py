"""Every API list and list page answers in a bounded number of queries (issue 19): the count for
three objects of each kind and for twelve is the same, so none reads one more row per object (an
N+1). Counted, never timed: the machine's load cannot move a count."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from alerts.models import Delivery, Subscription
from campaigns.models import CampaignSchedule, ReadinessCheck, Run, Transfer
from campaigns.runs import scheduling
from collectors.events import log_event
from collectors.models import Host, HostTestSeries
from tests.support.api import api
from tests.support.factories import endpoint, mock_campaign

pytestmark = pytest.mark.django_db

LISTS = ["backends", "endpoints", "campaigns", "schedules", "fts-instances", "runs", "readiness-checks",
         "transfers", "hosts", "host-tests", "events", "samples", "alert-subscriptions",
         "alert-deliveries"]  # fmt: skip


def add_objects(n: int, tag: str) -> None:
    """n of everything a list shows, each with the relations it names (hosts, endpoints, runs)."""
    for i in range(n):
        name = f"{tag}{i}"
        campaign = mock_campaign(name)
        host = Host.objects.create(name=f"door-{name}")
        source = campaign.sources.first()
        source.hosts.add(host)
        run = Run.objects.create(campaign=campaign, state="succeeded", summary={"total": {}, "judgement": {}})
        Run.objects.create(campaign=campaign, state="partial", retry_of=run)
        Transfer.objects.create(run=run, index=0, source="mock://src.test/a", destination="mock://dst.test/a",
                                source_endpoint=source, destination_endpoint=source, size=1)  # fmt: skip
        scheduling.save_schedule(CampaignSchedule(campaign=campaign, kind="interval", interval_minutes=60))
        ReadinessCheck.objects.create(endpoint=endpoint(f"ready-{name}", "root://door:1094//x/"))
        HostTestSeries.objects.create(host=host, tool="dd", params={"tool": "dd"}, repeats=1, byte_budget=1)
        log_event("restart", f"restart {name}", host=host, run=run, backend=source.backend, endpoint=source)
        team = Subscription.objects.create(name=f"team-{name}", campaign=campaign, email="team@example.org",
                                           webhook_url="https://chat.test/hooks/secret")  # fmt: skip
        Delivery.objects.create(subscription=team, kind="regression", campaign=campaign, run=run, host=host,
                                subject=f"{name} regressed", body="", state="sent")  # fmt: skip


def queries(client, path: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(path)
    assert response.status_code == 200, (path, response.content[:300])
    return len(captured)


PAGES = ["/", "/campaigns/", "/campaigns/runs/", "/campaigns/status/", "/campaigns/backends/", "/hosts/",
         "/hosts/events/", "/api/v1/grafana/annotations?from=0&to=4102444800000"]  # fmt: skip


def counts(client, paths: list[str]) -> dict[str, int]:
    return {path: queries(client, path) for path in paths}


def test_no_list_reads_a_row_per_object(viewer, client, settings):
    # The grants a process keeps for 5 s ran out between the two rounds on a busy machine (2
    # queries more on one page): held for the whole test, both rounds read the same.
    settings.STORAGEOPS_GRANTS_SECONDS = 3600
    token_client = api(viewer, "viewer")
    client.force_login(viewer)
    lists = [f"/api/v1/{name}/" for name in LISTS]
    add_objects(3, "a")
    counts(token_client, lists[:1])  # the first request of a session reads what is then cached
    counts(client, PAGES[:1])
    few = {**counts(token_client, lists), **counts(client, PAGES)}
    add_objects(9, "b")
    many = {**counts(token_client, lists), **counts(client, PAGES)}
    grew = {path: (few[path], many[path]) for path in few if many[path] != few[path]}
    assert not grew, f"queries for 3 objects -> for 12, per list: {grew}"

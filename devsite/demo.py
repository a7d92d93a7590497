"""The demo site of `make run`: two real XRootD doors registered as two backends, a short demo
sweep between them that starts on first launch, so a newcomer sees a real run, and a client pool
of two clients with a campaign that uses it, for a newcomer to start a pooled run. With
STORAGEOPS_DEMO_TOKENS (runsite --token-doors), a storage-token issuer and three davs doors on
it: two that check its tokens and one that accepts any, for the readiness grid's token rounds."""

from __future__ import annotations

from django.db import transaction

from campaigns.models import Backend, Campaign, Endpoint, TokenIssuer
from collectors.choices import HostRole
from collectors.models import Host

DEMO_CAMPAIGN = "demo-sweep"
DEMO_POOL_CAMPAIGN = "demo-pool"
DEMO_CLIENTS = ("demo-client1", "demo-client2")
#: The aud the demo's token doors expect and its issuer puts in its tokens.
DEMO_AUDIENCE = "https://storageops.demo/doors"


@transaction.atomic
def register_demo_site(
    doors: dict[str, str], xrootd_version: str = "", watches: dict[str, dict] | None = None
) -> Campaign:
    """Create or update the demo backends, hosts, endpoints and campaign.

    `doors` maps a door name to its root:// URL prefix; ports may change between launches,
    so existing endpoints are updated rather than duplicated. `watches` maps a door name to
    what its collector watches (Host fields watched_files, watched_services, watched_filesystems,
    log_files).
    """
    endpoints = []
    for letter, (door, url) in zip("ab", sorted(doors.items()), strict=False):
        backend, _ = Backend.objects.update_or_create(
            name=f"demo-xrootd-{letter}",
            defaults={
                "access_layer": "xrootd",
                "access_version": xrootd_version,
                "unified_layer": "local filesystem",
                "storage_layer": "the machine's disk",
                "notes": "Demo backend started by make run: an XRootD server on loopback, run as nobody.",
            },
        )
        endpoint, _ = Endpoint.objects.update_or_create(name=f"{door}-root", defaults={"backend": backend, "url": url})
        endpoint.hosts.set([door_host(door, watches)])
        endpoints.append(endpoint)
    campaign, created = Campaign.objects.get_or_create(
        name=DEMO_CAMPAIGN,
        defaults={
            "description": "A short third-party-copy sweep between the two demo doors, adler32 checked.",
            # XRootD's root:// TPC takes ~2.5 s a copy here whatever the size (xrdcp --tpc only
            # too), so the sweep is sized to finish in about a minute.
            "create_sources": True,
            "file_count": 36,
            "file_size": 16 * 1000**2,
            "source_file_count": 6,
            "concurrency_steps": [1, 2, 4],
            "step_files": 12,
            "checksum_mode": "both",
            "timeout": 300,
        },
    )
    if created:
        campaign.sources.set([endpoints[0]])
        campaign.destinations.set([endpoints[1]])
    return campaign


def door_host(door: str, watches: dict[str, dict] | None) -> Host:
    """The host of a demo door, with what its collector watches (runsite starts one per door)."""
    return Host.objects.update_or_create(
        name=door,
        defaults={"address": "127.0.0.1", "role": "door", "sample_interval": 5, **(watches or {}).get(door, {})},
    )[0]


@transaction.atomic
def register_demo_pool(sweep: Campaign) -> list[str]:
    """Two client hosts (each served by `manage.py client`) and a campaign whose copies they
    share, between the doors of the demo sweep. Not started: it waits for a newcomer's click.
    Returns the clients' host names."""
    clients = [
        Host.objects.update_or_create(
            name=name,
            defaults={
                "address": "127.0.0.1",
                "role": HostRole.CLIENT,
                "notes": "Demo pool client started by make run.",
            },
        )[0]
        for name in DEMO_CLIENTS
    ]
    campaign, created = Campaign.objects.get_or_create(
        name=DEMO_POOL_CAMPAIGN,
        defaults={
            "description": "The demo doors' copies shared by a pool of two clients (docs/scale-out.md): "
            "start it, and the run page's Clients table shows each client's copies.",
            "create_sources": True,
            "file_count": 16,
            "file_size": 16 * 1000**2,
            "source_file_count": 4,
            "concurrency_steps": [2, 4],
            "step_files": 8,
            "checksum_mode": "both",
            "timeout": 300,
        },
    )
    if created:
        campaign.sources.set(sweep.sources.all())
        campaign.destinations.set(sweep.destinations.all())
        campaign.clients.set(clients)
    return [c.name for c in clients]


DEMO_ISSUER = "demo-iam"
#: The token doors of the demo: two that check tokens, one that accepts any (a finding to see).
TOKEN_DOORS = ("tokens1", "tokens2", "anytoken")


@transaction.atomic
def register_token_demo(
    issuer, doors: dict[str, str], ca_dir: str, ca_file: str, watches: dict[str, dict] | None = None
) -> list[Endpoint]:
    """The demo's storage-token issuer (devsite.token_issuer, started by runsite) as a TokenIssuer,
    and an endpoint on it per token door (`doors`: name -> davs:// URL prefix below /data/). Its
    secret and the ports are new at every start: the rows are updated."""
    row, _ = TokenIssuer.objects.update_or_create(
        name=DEMO_ISSUER,
        defaults={
            "token_endpoint": issuer.token_endpoint, "client_id": issuer.client_id,
            "client_secret": issuer.client_secret, "audience": DEMO_AUDIENCE, "base_path": "/data",
            "ca_file": ca_file,
            "notes": "The demo's test issuer (devsite.token_issuer, a double of a site's IAM) started by make run.",
        },
    )  # fmt: skip
    backend, _ = Backend.objects.update_or_create(
        name="demo-xrootd-tokens",
        defaults={"access_layer": "xrootd", "notes": "Demo doors of make run checking storage tokens "
                  "(xrootd-scitokens-plugins); anytoken has no plugin and lets any token through."},
    )  # fmt: skip
    endpoints = []
    for name, url in sorted(doors.items()):
        endpoint, _ = Endpoint.objects.update_or_create(
            name=f"{name}-davs", defaults={"backend": backend, "url": url, "token_issuer": row, "ca_dir": ca_dir}
        )
        endpoint.hosts.set([door_host(name, watches)])
        endpoints.append(endpoint)
    return endpoints

"""A finished run worth a report: driven by the real driver on gfal2's mock plugin, its door a
registered host whose collector samples (written ahead, over the minute the run takes) give the
verdict its host figures per step, an event in its window, and secrets where a careless report
would leak them: the destination's bearer token and X.509 proxy path, an alert webhook."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from alerts.models import Subscription
from campaigns.models import Run
from collectors.events import log_event
from collectors.models import Host, MetricSample
from tests.support.factories import campaign, endpoint, mock_campaign
from tests.support.runs import drive

TOKEN = "report-bearer-3f9c1d7e-never-shown"
PROXY = "/etc/grid-security/report-proxy-never-shown"
WEBHOOK = "https://hooks.example.org/services/T0/B0/report-webhook-never-shown"
SECRETS = (TOKEN, PROXY, WEBHOOK, "report-webhook-never-shown")


def reported_run(name: str = "report") -> Run:
    campaign = mock_campaign(name, dst_query="time=0.1", file_count=40, concurrency_steps=[2, 4], step_files=20)
    door = campaign.destinations.get()
    door.bearer_token, door.x509_proxy = TOKEN, PROXY
    door.save()
    host = Host.objects.create(name=f"{name}-door", sample_interval=1, link_speed_bps=10_000_000_000)
    door.hosts.add(host)
    Subscription.objects.create(name=f"{name}-team", campaign=campaign, webhook_url=WEBHOOK)
    now = timezone.now()
    samples = []
    for i in range(-100, 1200):  # every 50 ms for a minute: each step holds several
        t = now + timedelta(milliseconds=50 * i)
        samples += [
            MetricSample(host=host, metric="cpu.percent", time=t, value=40.0),
            MetricSample(host=host, metric="proc.cpu_percent", label="xrootd", time=t, value=60.0),
            MetricSample(host=host, metric="proc.cpus_allowed", label="xrootd", time=t, value=2.0),
            MetricSample(host=host, metric="disk.busy_percent", label="sda", time=t, value=25.0),
            MetricSample(host=host, metric="net.rx_bps", label="eth0", time=t, value=125_000_000.0),
        ]
    MetricSample.objects.bulk_create(samples, batch_size=5000)
    run = drive(campaign)
    log_event("config_change", "xrootd.cfg: xrd.sched maxt raised", source="collector", host=host,
              time=run.started_at + (run.finished_at - run.started_at) / 2)  # fmt: skip
    return Run.objects.get(pk=run.pk)


BACKENDS = ("dcache-zfs", "dcache-lustre", "xrootd-lustre")  # BNL's three


def three_backend_runs() -> list[Run]:
    """Three runs from one source (with a token) into three backends, as BNL compared them."""
    src = endpoint("cmp-src", "mock://src.test/data/", backend_name="source-disk", bearer_token=TOKEN)
    runs = []
    for i, name in enumerate(BACKENDS):
        # Copies of 1 s (the mock plugin's time): steps long enough to draw a curve over time.
        dst = endpoint(f"cmp-{name}", f"mock://{name}.test/data/?time=1", backend_name=name)
        c = campaign(f"cmp-{name}", [src], [dst], file_count=12 + 4 * i, concurrency_steps=[2, 4], step_files=6 + 2 * i)
        runs.append(drive(c))
    return runs


def compare_query(runs: list[Run]) -> str:
    """The compare page's query for `runs`, untrimmed, steps against concurrency."""
    return f"runs={','.join(str(r.pk) for r in runs)}&warmup=0&tail=0&x=concurrency"

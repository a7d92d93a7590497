"""Debian's prometheus-node-exporter, started on a free loopback port, scraped into samples."""

from __future__ import annotations

import shutil
import time

import pytest
import requests

from collectors import node_exporter
from collectors.models import MetricSample
from storageops.schedules import builtin
from tests.support.ports import free_port
from tests.support.processes import ManagedProcess

BINARY = "/usr/bin/prometheus-node-exporter"


@pytest.fixture
def exporter(log_dir):
    if not shutil.which(BINARY):
        pytest.fail(f"{BINARY} is missing: apt-get install -y prometheus-node-exporter (scripts/bootstrap.sh test)")
    port = free_port()
    argv = [
        BINARY,
        f"--web.listen-address=127.0.0.1:{port}",
        # Only what StorageOps stores: a faster scrape and no surprises from odd collectors.
        "--collector.disable-defaults",
        "--collector.cpu",
        "--collector.loadavg",
        "--collector.meminfo",
        "--collector.netdev",
        "--collector.diskstats",
    ]
    process = ManagedProcess(f"node-exporter-{port}", argv, log_dir=log_dir).start()
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                requests.get(url, timeout=1).raise_for_status()
                break
            except requests.RequestException:
                if time.monotonic() > deadline or process.returncode is not None:
                    raise RuntimeError(f"node_exporter did not answer:\n{process.log_text()}") from None
                time.sleep(0.1)
        yield url
    finally:
        process.stop()


def _values(host, metric):
    return list(MetricSample.objects.filter(host=host, metric=metric).values_list("value", flat=True))


def test_scraped_metrics_are_stored_under_the_collector_names(make_host, exporter):
    host = make_host(node_exporter_url=exporter)
    make_host(name="no-exporter")  # skipped: no URL
    first = node_exporter.scrape_all()
    assert set(first) == {host.name} and first[host.name] > 0
    assert not _values(host, "cpu.percent")  # rates need two scrapes
    time.sleep(1.1)
    second = node_exporter.scrape_all()
    assert second[host.name] > first[host.name]

    [cpu] = _values(host, "cpu.percent")
    assert 0 <= cpu <= 100
    assert all(v >= 0 for v in _values(host, "load1")) and len(_values(host, "load1")) == 2
    assert all(v > 0 for v in _values(host, "mem.used"))
    for metric in ("net.rx_bps", "net.tx_bps", "disk.read_bps", "disk.write_bps", "disk.read_iops"):
        assert all(v >= 0 for v in _values(host, metric)), metric
    assert MetricSample.objects.filter(host=host, metric="net.rx_bps").exclude(label="").exists()
    assert not MetricSample.objects.filter(host=host, label="lo").exists()


def test_an_unreachable_exporter_is_reported_not_raised(make_host):
    host = make_host(node_exporter_url=f"http://127.0.0.1:{free_port()}/metrics")
    assert node_exporter.scrape_all()[host.name].startswith("error:")


def test_the_scrape_is_a_builtin_schedule():
    assert any(task == "collectors.node_exporter.scrape" for _, task, _ in builtin())


def test_the_tasks_are_registered_under_their_names():
    from storageops.celery import app

    app.loader.import_default_modules()
    assert {"collectors.node_exporter.scrape", "collectors.host.run_test"} <= set(app.tasks)
    for name in ("collectors.node_exporter.scrape", "collectors.host.run_test"):
        assert app.tasks[name].time_limit and app.tasks[name].soft_time_limit

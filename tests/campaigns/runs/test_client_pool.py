"""A run spread over a pool of three client hosts, each a real `manage.py client` worker on its
own queue, doing streamed davs copies between two real XRootD doors; one client SIGKILLed
mid-step and its share finished by the two left.

What is checked comes from the world, not from the code: the bytes and adler32 of every file
on the destination door's disk, each transfer's own start and end times (how many copies ran
at once, per client and in all), and the run's events.

The destination door serves through XRootD's throttle (24 MB/s) so each 8 MB copy takes about
two seconds at six at once: long enough for the client killed to have copies under way, on a
machine of any speed. Each client runs in a network namespace of its own, with its own address
and interface on a bridge (tests/support/netns.py): the doors are reached at the bridge's
address, PostgreSQL and Redis through relays, and each client's interface counts its own bytes.
"""

from __future__ import annotations

import time
from urllib.parse import urlsplit

import pytest
from django.conf import settings

from campaigns import runs
from campaigns.choices import RunState
from campaigns.models import Run, Transfer
from campaigns.results.concurrency import in_flight
from collectors.models import Event, Host
from devsite.xrootd_server import XRootDServer, make_test_ca, throttle_config
from tests.campaigns.runs.test_real_transfers import adler32
from tests.support.factories import campaign, endpoint, mock_campaign
from tests.support.netns import ClientNet, client_network, subnet
from tests.support.processes import PYTHON, ROOT, ManagedProcess
from tests.support.workers import celery_worker, child_env, pytest_database_url

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

FILES = 36
SIZE = 8 * 1024 * 1024
CONCURRENCY = 6
RATE = 24_000_000
CLIENTS = ("c1", "c2", "c3")
DOOMED = "c2"


def most_at_once(rows) -> int:
    """The most copies under way at one moment, from their own start and end times."""
    return in_flight([(t.started_at.timestamp(), t.finished_at.timestamp()) for t in rows])[1] if rows else 0


def wait_for(check, timeout: float, what: str, *processes: ManagedProcess):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := check():
            return found
        time.sleep(0.2)
    logs = "\n".join(f"--- {p.name}\n{p.log_text()[-2500:]}" for p in processes)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}\n{logs}")


def on_bridge(url: str, net: ClientNet) -> str:
    """A URL of this machine as a client namespace reaches it: at the bridge's address."""
    return url.replace("127.0.0.1", net.bridge_address).replace("localhost", net.bridge_address)


@pytest.fixture
def client_net(log_dir):
    database, broker = urlsplit(pytest_database_url()), urlsplit(settings.CELERY_BROKER_URL)
    with client_network(list(CLIENTS), [database.port or 5432, broker.port or 6379], log_dir) as net:
        yield net


@pytest.fixture
def pool_processes(log_dir, client_net):
    """The three clients, each in its namespace, and a worker to drive, all ready."""
    for name in CLIENTS:
        Host.objects.create(name=name, role="client", address=client_net.addresses[name])
    env = child_env(DATABASE_URL=on_bridge(pytest_database_url(), client_net),
                    CELERY_BROKER_URL=on_bridge(settings.CELERY_BROKER_URL, client_net))  # fmt: skip
    clients = {
        name: ManagedProcess(
            f"client-{name}",
            client_net.argv(name, [PYTHON, "manage.py", "client", "--host", name, "--loglevel", "info"]),
            env, log_dir, cwd=ROOT,
        ).start()
        for name in CLIENTS
    }  # fmt: skip
    processes = [celery_worker(log_dir, name="pool-driver"), *clients.values()]
    try:
        for process in processes:
            process.wait_for_log("ready.", timeout=60)
        yield clients, processes
    finally:
        ManagedProcess.stop_all(processes)


@pytest.fixture
def bridge_ca(tmp_path):
    """A CA whose host certificate also names the bridge's address, where the clients reach the doors."""
    return make_test_ca(tmp_path / "ca", extra_ips=[subnet()[0]])


@pytest.fixture
def doors(tmp_path, bridge_ca):
    source = XRootDServer("pool-src", tmp_path / "s", workdir=tmp_path / "sr", https=bridge_ca)
    destination = XRootDServer(
        "pool-dst", tmp_path / "d", workdir=tmp_path / "dr", https=bridge_ca, extra_config=throttle_config(RATE)
    )
    try:
        yield source.start(), destination.start()
    finally:
        source.stop()
        destination.stop()


def test_a_run_spread_over_three_clients_survives_one_killed_mid_step(
    doors, bridge_ca, client_net, pool_processes, client, viewer
):
    source, destination = doors
    creds = {"bearer_token": "storageops-test", "ca_dir": str(bridge_ca.ca_dir)}
    obj = campaign(
        "pooled", [endpoint("pool-src", on_bridge(source.davs_url_for("/data/"), client_net), **creds)],
        [endpoint("pool-dst", on_bridge(destination.davs_url_for("/data/"), client_net), **creds)],
        file_count=FILES, file_size=SIZE, create_sources=True, tpc_mode="streamed", checksum_mode="both",
        concurrency_steps=[CONCURRENCY], timeout=120,
    )  # fmt: skip
    obj.clients.set(Host.objects.filter(name__in=CLIENTS))
    clients, processes = pool_processes
    try:
        run = runs.start_run(obj, trigger="command")
        # Mid-step: the doomed client has finished copies and has more under way.
        wait_for(
            lambda: Transfer.objects.filter(run=run, state="succeeded", transfer_host=DOOMED).count() >= 2,
            120, f"{DOOMED}'s first copies", *processes,
        )  # fmt: skip
        assert Transfer.objects.filter(run=run, state="succeeded").count() < FILES - CONCURRENCY
        clients[DOOMED].kill()
        killed_at = time.time()
        wait_for(lambda: not Run.objects.get(pk=run.pk).is_live, 240, "the run to end", *processes)
    finally:
        # The fixture stops them too; stopped here, the checks below read a run no process touches.
        ManagedProcess.stop_all(processes)

    run.refresh_from_db()
    rows = list(Transfer.objects.filter(run=run).order_by("index"))
    events = list(Event.objects.filter(run_id=run.pk, kind="run_incident").values_list("summary", flat=True))
    report = f"{run.state} {run.stop_reason}\n" + "\n".join(events) + "\n" + "\n".join(
        f"{t.index} {t.transfer_host} {t.state} {t.started_at:%H:%M:%S.%f} {t.finished_at:%H:%M:%S.%f} {t.history}"
        for t in rows if t.started_at and t.finished_at
    )  # fmt: skip
    print(report)
    total = run.summary["total"]
    print(f"run: {total['files_ok']} files, {total['bytes']} B, {total['throughput_bps'] / 1e6:.1f} MB/s "
          f"over {total['window_seconds']:.1f} s")  # fmt: skip
    for name, f in run.summary["clients"].items():
        used = run.summary["client_pool"][name]
        print(f"{name}: {f['files_ok']} files, {f['bytes']} B, part {f['share_bps'] / 1e6:.1f} MB/s, own "
              f"{f['throughput_bps'] / 1e6:.1f} MB/s, cpu {used['cpu_seconds']} s, nic {used.get('nic')}, "
              f"lost {used['lost']!r}")  # fmt: skip

    # Every transfer final exactly once, succeeded, on its first attempt: a lost client's copy
    # is copied again within the same attempt, and its row keeps the lost one in its history.
    assert run.state == RunState.SUCCEEDED and (run.files_done, run.files_failed) == (FILES, 0), report
    assert [t.state for t in rows] == ["succeeded"] * FILES and {t.attempt for t in rows} == {1}, report
    # Each copy was streamed through its client, as asked: gfal2's own word, on every row.
    assert {t.copy_mode for t in rows} == {"streamed"}, report
    lost = [t for t in rows if any(h.get("category") == "client_lost" for h in t.history)]
    assert lost and all(t.transfer_host != DOOMED for t in lost), report
    assert all(t.finished_at.timestamp() <= killed_at for t in rows if t.transfer_host == DOOMED), report
    assert {t.transfer_host for t in rows} == set(CLIENTS), report
    # The bytes on the destination door's disk are the source's.
    for t in rows:
        src = source.local_path("/" + urlsplit(t.source).path.lstrip("/"))
        dst = destination.local_path("/" + urlsplit(t.destination).path.lstrip("/"))
        assert dst.stat().st_size == src.stat().st_size == SIZE
        assert adler32(dst) == adler32(src) == int(t.destination_checksum, 16), t.index

    # The step ran at its concurrency across the pool and each client at its share: two each,
    # three each for the two left once the lost client's share was re-planned.
    assert most_at_once(rows) <= CONCURRENCY, report
    by_client = {name: [t for t in rows if t.transfer_host == name] for name in CLIENTS}
    assert most_at_once(by_client[DOOMED]) <= 2, report
    for name in ("c1", "c3"):
        before = [t for t in by_client[name] if t.started_at.timestamp() < killed_at]
        assert most_at_once(before) <= 2 and most_at_once(by_client[name]) <= 3, report
    [said] = [e for e in events if e.startswith(f"Client {DOOMED} lost")]
    assert "now c1 3, c3 3" in said and "re-planned onto c1, c3" in said, report
    assert f"client {DOOMED} lost" in run.stop_reason, report

    # Per-client figures add up to the run's.
    figures = run.summary["clients"]
    assert sum(f["files_ok"] for f in figures.values()) == total["files_ok"] == FILES
    assert sum(f["bytes"] for f in figures.values()) == total["bytes"] == FILES * SIZE
    assert sum(f["share_bps"] for f in figures.values()) == pytest.approx(total["throughput_bps"], rel=1e-9)
    pool = run.summary["client_pool"]
    assert pool[DOOMED]["lost"].startswith("no heartbeat") and not pool["c1"]["lost"] and not pool["c3"]["lost"]
    assert all(pool[name]["cpu_seconds"] > 0 for name in CLIENTS), pool
    # Each client's own interface carried its copies: streamed, every byte in from the source
    # and out to the destination (the lost one's counters stop at its last beat).
    for name in ("c1", "c3"):
        rx, tx = pool[name]["nic"][client_net.interfaces[name]]
        assert rx >= figures[name]["bytes"] and tx >= figures[name]["bytes"], (name, rx, tx, figures[name])

    # The run page puts the clients beside the doors, the lost one marked.
    client.force_login(viewer)
    page = client.get(run.get_absolute_url()).content.decode()
    assert all(f'data-client="{name}"' in page for name in CLIENTS)
    assert f'<tr data-client="{DOOMED}" class="bad">' in page and "no heartbeat for 5 s" in page


@pytest.fixture
def root_doors(tmp_path):
    """Two plain root:// doors (no TLS, no throttle), which the namespaces reach at the bridge."""
    source = XRootDServer("pool-rsrc", tmp_path / "rs", workdir=tmp_path / "rsr")
    destination = XRootDServer("pool-rdst", tmp_path / "rd", workdir=tmp_path / "rdr")
    try:
        yield source.start(), destination.start()
    finally:
        source.stop()
        destination.stop()


def test_a_pooled_streamed_run_between_root_doors_passes_every_byte_through_its_client(
    root_doors, client_net, pool_processes
):
    """Streamed between two root:// doors, gfal2 would run a third-party copy; StorageOps streams
    it through the copying process instead (Gfal2Copier._stream). In a pool that process is a
    client in its own namespace: its interface must carry each of its copies in and out."""
    source, destination = root_doors
    files, size = 12, 4 * 1024 * 1024
    obj = campaign(
        "pooled-root", [endpoint("rpool-src", on_bridge(source.root_url_for("/data/"), client_net))],
        [endpoint("rpool-dst", on_bridge(destination.root_url_for("/data/"), client_net))],
        file_count=files, file_size=size, create_sources=True, tpc_mode="streamed", checksum_mode="both",
        concurrency_steps=[len(CLIENTS)], timeout=120,
    )  # fmt: skip
    obj.clients.set(Host.objects.filter(name__in=CLIENTS))
    _, processes = pool_processes
    run = runs.start_run(obj, trigger="command")
    wait_for(lambda: not Run.objects.get(pk=run.pk).is_live, 180, "the run to end", *processes)
    run.refresh_from_db()
    rows = list(Transfer.objects.filter(run=run).order_by("index"))
    report = f"{run.state} {run.stop_reason}\n" + "\n".join(
        f"{t.index} {t.transfer_host} {t.state} {t.copy_mode!r} {t.error_message}" for t in rows
    )
    assert run.state == RunState.SUCCEEDED and run.files_done == files, report
    assert {t.copy_mode for t in rows} == {"streamed"}, report
    assert {t.transfer_host for t in rows} == set(CLIENTS), report
    for t in rows:
        src = source.local_path("/" + urlsplit(t.source).path.lstrip("/"))
        dst = destination.local_path("/" + urlsplit(t.destination).path.lstrip("/"))
        assert dst.stat().st_size == src.stat().st_size == size, t.index
        assert adler32(dst) == adler32(src) == int(t.destination_checksum, 16), t.index

    figures, pool = run.summary["clients"], run.summary["client_pool"]
    assert sum(f["bytes"] for f in figures.values()) == files * size
    for name in CLIENTS:
        rx, tx = pool[name]["nic"][client_net.interfaces[name]]
        mine = figures[name]["bytes"]
        assert mine == size * sum(1 for t in rows if t.transfer_host == name), (name, figures[name])
        print(f"root streamed, client {name}: {figures[name]['files_ok']} files, {mine} B, "
              f"rx {rx} B, tx {tx} B on {client_net.interfaces[name]}")  # fmt: skip
        # Streamed through this client: every byte came in from the source door and went out to the
        # destination door over its own interface (a third-party copy would leave both near zero).
        assert rx >= mine and tx >= mine, (name, rx, tx, figures[name])


def test_steps_hold_their_barrier_and_start_together_across_the_pool(pool_processes):
    """Two steps (3, then 6 at once) of gfal2 mock copies of 2 s each, started together: no copy
    of the second step begins before the first step's last one ended, each step's first wave
    (on three clients) all began before any of it ended, and each client ran its share."""
    _, processes = pool_processes
    obj = mock_campaign(
        "pooled-steps", dst_query="time=2", file_count=24, concurrency_steps=[3, 6], step_files=12,
        start_together=True,
    )  # fmt: skip
    obj.clients.set(Host.objects.filter(name__in=CLIENTS))
    run = runs.start_run(obj, trigger="command")
    wait_for(lambda: not Run.objects.get(pk=run.pk).is_live, 180, "the run to end", *processes)
    run.refresh_from_db()
    assert run.state == RunState.SUCCEEDED and run.files_done == 24, run.stop_reason
    rows = list(Transfer.objects.filter(run=run))
    spans = {step: sorted((t.started_at.timestamp(), t.finished_at.timestamp()) for t in rows if t.step == step)
             for step in (0, 1)}  # fmt: skip
    assert max(e for _, e in spans[0]) <= min(s for s, _ in spans[1]), "the second step began before the first ended"
    for step, target in ((0, 3), (1, 6)):
        wave = spans[step][:target]
        mean, peak = in_flight(spans[step])
        print(f"step {step}: target {target}, mean {mean:.2f}, peak {peak}, first wave spread "
              f"{max(s for s, _ in wave) - min(s for s, _ in wave):.3f} s")  # fmt: skip
        # Together: the step's first `target` copies, on three clients, all began before any ended.
        assert peak == target and max(s for s, _ in wave) < min(e for _, e in wave), (step, spans[step])
        for name in CLIENTS:
            mine = [(t.started_at.timestamp(), t.finished_at.timestamp()) for t in rows
                    if t.step == step and t.transfer_host == name]  # fmt: skip
            assert in_flight(mine)[1] == target // len(CLIENTS), (step, name, mine)
    figures = run.summary["clients"]
    assert sum(f["files_ok"] for f in figures.values()) == 24 and set(figures) == set(CLIENTS)


def test_a_pooled_run_cancelled_mid_step_aborts_on_every_client(pool_processes):
    """Mock copies of 30 s, six at once over three clients, cancelled with no grace: the copies
    under way on every client are aborted, every transfer ends once (cancelled or not started),
    and each client's serve task ends."""
    clients, processes = pool_processes
    obj = mock_campaign("pooled-cancel", dst_query="time=30", file_count=30, concurrency_steps=[6], cancel_grace=0)
    obj.clients.set(Host.objects.filter(name__in=CLIENTS))
    run = runs.start_run(obj, trigger="command")
    wait_for(lambda: Run.objects.get(pk=run.pk).active_transfers >= 6, 60, "six copies under way", *processes)
    started = time.monotonic()
    runs.request_cancel(Run.objects.get(pk=run.pk))
    wait_for(lambda: not Run.objects.get(pk=run.pk).is_live, 60, "the run to end", *processes)
    took = time.monotonic() - started
    run.refresh_from_db()
    rows = list(Transfer.objects.filter(run=run))
    assert run.state == RunState.CANCELLED and run.files_done == 0, run.stop_reason
    assert {t.state for t in rows} <= {"cancelled", "skipped"} and len(rows) == 30
    # The six under way were aborted, not waited for: their copies would have taken 30 s.
    aborted = [t for t in rows if t.transfer_host]
    assert sorted(t.transfer_host for t in aborted) == ["c1", "c1", "c2", "c2", "c3", "c3"], aborted
    assert took < 25, f"the cancel took {took:.1f} s"
    for name, process in clients.items():
        wait_for(lambda p=process: "client_serve" in p.log_text() and "succeeded in" in p.log_text(), 30,
                 f"{name}'s serve task to end", process)  # fmt: skip


def test_a_pool_with_no_client_answering_fails_the_run_saying_why(log_dir):
    Host.objects.create(name="absent1", role="client")
    worker = celery_worker(log_dir, name="lonely-driver", STORAGEOPS_CLIENT_JOIN_SECONDS="3")
    try:
        worker.wait_for_log("ready.", timeout=60)
        obj = mock_campaign("pooled-alone", file_count=4)
        obj.clients.set(Host.objects.filter(name="absent1"))
        run = runs.start_run(obj, trigger="command")
        wait_for(lambda: not Run.objects.get(pk=run.pk).is_live, 60, "the run to end", worker)
    finally:
        worker.stop()
    run.refresh_from_db()
    assert run.state == RunState.FAILED, run.stop_reason
    assert run.stop_reason.startswith("No client of the pool answered within 3 s (absent1)")
    assert "manage.py client --host NAME" in run.stop_reason
    assert set(Transfer.objects.filter(run=run).values_list("state", flat=True)) <= {"skipped", "queued"}

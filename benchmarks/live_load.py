#!/usr/bin/env python3
"""Twenty people at once against a live run: the server as gunicorn runs it, over loopback.

A real Celery worker drives a live mock run (gfal2's mock plugin, 1 s copies at concurrency
300, recording as it goes) while twenty clients, each a process of its own, use the site for
`--seconds`:

- ten browsers on the live run's page, doing what the page does: the page once, then the
  progress partial every 2 s (htmx) and the six chart JSON documents together every 5 s
  (charts.js: Promise.all, then wait), each browser with its own session;
- ten API scripts, each with its own token, asking once a second in turn for the runs list,
  the campaigns list, the live run, and the live run's copies in flight.

The server is gunicorn with storageops/gunicorn_conf.py (processes and threads as it sizes them
for this machine), on a free loopback port, warmed first (each page asked a few times per
process, as a site serving for days has). Each request's time is taken by its client, from
sending it to having read the whole answer. Target: p95 <= 300 ms for the API lists and the run
page's JSON, and no error.

    .venv/bin/python benchmarks/live_load.py [--clients 20] [--seconds 60] [--history 100]

It uses the dashboard benchmark's database (storageops_bench_dashboard) when it is there, so
the lists and the live run sit beside 10,000,000 stored transfers; `--history` finished runs
(copies of a finished run's results, without rows) fill the runs list to a year's worth.
"""

from __future__ import annotations

import argparse
import http.client
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("STORAGEOPS_VAR_DIR", tempfile.mkdtemp(prefix="live-load-"))
os.environ.setdefault("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver")
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/storageops_bench_dashboard")

import harness

TARGETED = ("API", "chart")  # label prefixes the target is about


# --- The clients: plain HTTP, no Django (each runs in a process of its own) ----------------
def _get(conn: http.client.HTTPConnection, path: str, headers: dict) -> int:
    conn.request("GET", path, headers=headers)
    response = conn.getresponse()
    response.read()
    return response.status


def _timed(port: int, conns: dict, key: str, path: str, headers: dict, label: str, out: list) -> None:
    """One request, timed from sending it to having read the answer. A kept-alive connection the
    server closed while idle is opened again and the request sent again, as browsers do; only a
    fresh connection's failure, or an answer other than 200, is an error."""
    started = time.perf_counter()
    for fresh in (key not in conns, True):
        if fresh:
            conns[key] = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            status = _get(conns[key], path, headers)
            break
        except (OSError, http.client.HTTPException) as exc:
            conns[key].close()
            status = type(exc).__name__
            if fresh:
                break
    out.append((label, (time.perf_counter() - started) * 1000, status))


def browser(port: int, session: str, run_id: int, seconds: float, queue, documents: tuple[str, ...]) -> None:
    out: list = []
    conns: dict = {}
    headers = {"Cookie": f"sessionid={session}", "Accept": "text/html"}
    json_headers = {**headers, "Accept": "application/json"}
    time.sleep(random.uniform(0, 5))  # people do not open the page in step
    end = time.monotonic() + seconds
    _timed(port, conns, "page", f"/campaigns/runs/{run_id}/", headers, "page: live run page", out)

    def progress() -> None:
        while time.monotonic() < end:
            _timed(port, conns, "progress", f"/campaigns/runs/{run_id}/progress/", {**headers, "HX-Request": "true"},
                   "partial: progress (every 2 s)", out)  # fmt: skip
            time.sleep(2)

    ticker = threading.Thread(target=progress)
    ticker.start()
    while time.monotonic() < end:
        # The run page's chart documents together, each on a connection of its own, as a browser
        # fetches them (the names come from the page's chart registry: the clients have no Django).
        asks = [
            threading.Thread(target=_timed, args=(port, conns, name, f"/campaigns/runs/{run_id}/charts/{name}.json",
                                                  json_headers, f"chart: {name}.json", out))
            for name in documents
        ]  # fmt: skip
        for t in asks:
            t.start()
        for t in asks:
            t.join()
        time.sleep(5)
    ticker.join()
    queue.put(out)


def script(port: int, token: str, run_id: int, seconds: float, queue) -> None:
    out: list = []
    conns: dict = {}
    headers = {"Authorization": f"Token {token}", "Accept": "application/json"}
    asks = [
        ("API: runs list", "/api/v1/runs/"),
        ("API: campaigns list", "/api/v1/campaigns/"),
        ("API: live run", f"/api/v1/runs/{run_id}/"),
        ("API: transfers in flight", f"/api/v1/transfers/?run={run_id}&state=active"),
    ]
    time.sleep(random.uniform(0, 1))
    end = time.monotonic() + seconds
    i = random.randrange(len(asks))
    while time.monotonic() < end:
        label, path = asks[i % len(asks)]
        _timed(port, conns, "api", path, headers, label, out)
        i += 1
        time.sleep(1)
    queue.put(out)


# --- The site: data, worker, live run, gunicorn ---------------------------------------------
def history(count: int) -> None:
    """`count` finished runs carrying a finished run's results (no rows): a year of runs."""
    from campaigns.models import Run

    model = Run.objects.filter(state="succeeded").exclude(summary={}).order_by("-pk").first()
    have = Run.objects.filter(trigger="schedule", state="succeeded", stop_reason="live-load history").count()
    if model is None or have >= count:
        return
    Run.objects.bulk_create(
        Run(campaign_id=model.campaign_id, state="succeeded", trigger="schedule", snapshot=model.snapshot,
            summary=model.summary, versions=model.versions, planned_files=model.planned_files,
            files_done=model.files_done, files_failed=model.files_failed, bytes_done=model.bytes_done,
            started_at=model.started_at, finished_at=model.finished_at, stop_reason="live-load history")
        for _ in range(count - have)
    )  # fmt: skip


def live_run(files: int, concurrency: int):
    from campaigns import runs
    from campaigns.models import Backend, Campaign, Endpoint

    stamp = f"live-load-{int(time.time())}"
    backend, _ = Backend.objects.get_or_create(name="bench-mock", defaults={"access_layer": "xrootd"})
    src = Endpoint.objects.create(name=f"{stamp}-src", backend=backend, url="mock://src.bench/data/")
    dst = Endpoint.objects.create(name=f"{stamp}-dst", backend=backend, url="mock://dst.bench/data/?time=1")
    campaign = Campaign(name=stamp, file_count=files, file_size=1_000_000, concurrency_steps=[concurrency // 2,
                        concurrency], step_files=files // 2, checksum_mode="none")  # fmt: skip
    campaign.save()
    campaign.sources.set([src])
    campaign.destinations.set([dst])
    return runs.start_run(campaign, trigger="command")


def start_web(log_dir: Path) -> tuple[object, int]:
    from devsite.processes import ManagedProcess
    from devsite.xrootd_server import free_port

    port = free_port()
    env = {**os.environ, "STORAGEOPS_WEB_BIND": f"127.0.0.1:{port}", "STORAGEOPS_WEB_ACCESS_LOG": ""}
    # No control socket: gunicorn's default is one in the home folder, shared by every instance.
    argv = [sys.executable, "-m", "gunicorn", "storageops.wsgi:application", "-c", "python:storageops.gunicorn_conf",
            "--no-control-socket"]  # fmt: skip
    web = ManagedProcess("web", argv, env, log_dir, cwd=harness.ROOT).start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            if _get(conn, "/healthz", {}) == 200:
                return web, port
        except OSError:
            time.sleep(0.3)
        if web.returncode is not None:
            raise RuntimeError(web.log_text()[-3000:])
    raise TimeoutError("gunicorn did not answer /healthz in 60 s")


def warm(port: int, session: str, token: str, run_id: int, documents: tuple[str, ...]) -> None:
    """Every page and document the clients ask for, a few times per server process: a process's
    first answer of a kind loads its templates and code, which a site serving for days has done."""
    from storageops import gunicorn_conf

    browser_paths = [f"/campaigns/runs/{run_id}/", f"/campaigns/runs/{run_id}/progress/",
                     *(f"/campaigns/runs/{run_id}/charts/{name}.json" for name in documents)]  # fmt: skip
    api_paths = ["/api/v1/runs/", "/api/v1/campaigns/", f"/api/v1/runs/{run_id}/",
                 f"/api/v1/transfers/?run={run_id}&state=active"]  # fmt: skip
    for _ in range(3 * gunicorn_conf.workers):
        for paths, headers in ((browser_paths, {"Cookie": f"sessionid={session}"}),
                               (api_paths, {"Authorization": f"Token {token}"})):  # fmt: skip
            for path in paths:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                _get(conn, path, headers)
                conn.close()


def credentials(people: int) -> tuple[list[str], list[str]]:
    """A session for each browser and a token for each script, of viewers."""
    from django.contrib.auth.models import Group, User
    from django.test import Client

    from storageops.api.tokens import create_token

    user, _ = User.objects.get_or_create(username="bench-viewer")
    user.groups.add(Group.objects.get(name="viewer"))
    sessions, tokens = [], []
    for i in range(people):
        client = Client()
        client.force_login(user)
        sessions.append(client.cookies["sessionid"].value)
        tokens.append(create_token(user, f"live-load {i}", "viewer")[1])
    return sessions, tokens


def report(results: list[tuple[str, float, object]]) -> bool:
    by_label: dict[str, list[float]] = defaultdict(list)
    errors: dict[str, int] = defaultdict(int)
    kinds: dict[object, int] = defaultdict(int)
    for label, ms, status in results:
        by_label[label].append(ms)
        if status != 200:
            errors[label] += 1
            kinds[status] += 1
    ok = True
    print(f"{'request':36} {'asks':>6} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'errors':>6}  target")
    for label in sorted(by_label):
        times = sorted(by_label[label])
        p95 = times[max(0, -(-95 * len(times) // 100) - 1)]
        targeted = label.split(":")[0] in TARGETED
        met = p95 <= 300 and not errors[label]
        ok &= met or not targeted
        mark = ("ok" if met else "MISSED") if targeted else "(reported)"
        print(f"{label:36} {len(times):6} {statistics.median(times):8.1f} {p95:8.1f} {times[-1]:8.1f} "
              f"{errors[label]:6}  {mark}")  # fmt: skip
    print(f"{len(results)} requests, {sum(errors.values())} errors {dict(kinds) or ''}")
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=20, help="half browsers, half API scripts")
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--history", type=int, default=100)
    parser.add_argument("--live-files", type=int, default=300_000)
    parser.add_argument("--concurrency", type=int, default=300)
    args = parser.parse_args()

    harness.setup()
    from django.core.management import call_command
    from django.db import connections

    from campaigns import runs
    from campaigns.models import Run
    from campaigns.web.chart_registry import RUN_DOCUMENTS
    from storageops import gunicorn_conf

    call_command("collectstatic", "--noinput", verbosity=0)
    print(f"machine: {harness.machine()}")
    conf = gunicorn_conf
    print(f"gunicorn: {conf.workers} processes x {conf.threads} threads ({conf.worker_class})")
    history(args.history)
    browsers = args.clients // 2
    sessions, tokens = credentials(args.clients)
    with tempfile.TemporaryDirectory() as tmp:
        worker = harness.start_worker("live-load", Path(tmp))
        web = None
        try:
            run = live_run(args.live_files, args.concurrency)
            while Run.objects.get(pk=run.pk).files_done < 2 * args.concurrency:  # under way, recording
                time.sleep(0.5)
            web, port = start_web(Path(tmp))
            print(f"runs in the database: {Run.objects.count():,}; live run {run.pk}: {args.live_files:,} copies "
                  f"of 1 s at concurrency {args.concurrency // 2}, then {args.concurrency}")  # fmt: skip
            documents = tuple(RUN_DOCUMENTS)
            warm(port, sessions[0], tokens[-1], run.pk, documents)
            before = Run.objects.get(pk=run.pk)
            connections.close_all()
            queue = multiprocessing.get_context("spawn").Queue()
            people = [
                multiprocessing.get_context("spawn").Process(
                    target=browser if i < browsers else script,
                    args=(port, sessions[i], run.pk, args.seconds, queue, documents)
                    if i < browsers
                    else (port, tokens[i], run.pk, args.seconds, queue),
                )
                for i in range(args.clients)
            ]
            started = time.monotonic()
            for p in people:
                p.start()
            results = []
            for _ in people:
                results += queue.get(timeout=args.seconds + 120)
            for p in people:
                p.join()
            elapsed = time.monotonic() - started
            after = Run.objects.get(pk=run.pk)
            recorded = (after.files_done + after.files_failed) - (before.files_done + before.files_failed)
            print(f"during the load: the live run recorded {recorded:,} copies in {elapsed:.0f} s "
                  f"({recorded / elapsed:.0f}/s; at most {args.concurrency}/s), state {after.state}")  # fmt: skip
            met = report(results)
            print(f"API lists and run-page JSON p95 <= 300 ms, no error: {'met' if met else 'MISSED'}")
            runs.request_cancel(after)
            harness.wait_for_run(run.pk, timeout=120)
        finally:
            if web is not None:
                web.stop()
            worker.stop()


if __name__ == "__main__":
    main()

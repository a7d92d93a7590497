#!/usr/bin/env python3
"""Hundreds of people watching one live run (issue 46), before and after, in one sitting.

For each version (`--before`, a git worktree of it under var/bench, then this working tree), on
a fresh database and Redis database of its own, the site as `make run` starts it (its own
`manage.py runsite`: gunicorn as it configures it, a Celery worker, beat, the demo doors,
collectors and pool clients) and a live mock run beside the demo (1 s copies at concurrency 4
then 8, 100,000 planned: it stays live for the whole sitting). Then, for each `--viewers` count,
that many viewers -- each with a session of its own, a viewer's role -- arrive together (within
`--arrive` seconds) and do what the run page does for `--seconds`:

- the page once (its time is the "first page"), then the transfers table it loads at once
  (hx-trigger="load") and the chart documents (charts.js on DOMContentLoaded);
- the progress partial 2 s after each answer was swapped in (htmx's `every 2s` on an element
  that replaces itself), the chart documents together (Promise.all) 5 s after each round --
  or, where the version's run page names a bundle (data-bundle), all of them in one request;
- as a browser: an answer that carried an ETag is asked again with If-None-Match (a 304 is the
  kept body); where the version's charts.js asks the timeline from its last point on, so do the
  viewers (`since`, `bucket`).

The viewers are spread over `--processes` client processes (asyncio, one connection a request:
the site keeps none alive), so the client is not the limit; their own CPU is reported beside the
site's. Printed per version and count: poll p50/p95 (progress and chart documents), the share of
polls late (answered more than 1 s after the page asked: a progress answer, a round of chart
documents), the first page's p50/p95, requests/s, 304s, errors, CPU seconds by role.

    .venv/bin/python benchmarks/viewers_load.py [--before 49f9bbb] [--viewers 100,300]
        [--seconds 60] [--processes 4] [--only before|after]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import random
import resource
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reference_compare import (  # the same sites, trees and CPU accounting
    _ROLES,
    ROOT,
    Site,
    _pct,
    _processes,
    cpu_by_program,
    head_label,
    in_tree,
    reference_tree,
)

LATE_MS = 1000.0
PROGRESS_EVERY = 2.0
CHARTS_EVERY = 5.0

# Run inside a site's tree: sessions of a viewer, and a live mock run that lasts.
_SETUP = r"""
import json, importlib, os, time
import django
django.setup()
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.auth.models import Group
from campaigns import runs
from campaigns.models import Backend, Campaign, Endpoint, Run
from campaigns.web import chart_registry
User = get_user_model()
user = User.objects.update_or_create(username="watcher", defaults={"is_superuser": False})[0]
user.groups.add(Group.objects.get(name="viewer"))
sessions = []
for _ in range(int(os.environ["BENCH_SESSIONS"])):
    store = importlib.import_module(settings.SESSION_ENGINE).SessionStore()
    store[SESSION_KEY] = str(user.pk)
    store[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    store[HASH_SESSION_KEY] = user.get_session_auth_hash()
    store.create()
    sessions.append(store.session_key)
stamp = f"viewers-{int(time.time())}"
backend, _ = Backend.objects.get_or_create(name="bench-mock", defaults={"access_layer": "xrootd"})
src = Endpoint.objects.create(name=f"{stamp}-src", backend=backend, url="mock://src.bench/data/")
dst = Endpoint.objects.create(name=f"{stamp}-dst", backend=backend, url="mock://dst.bench/data/?time=1")
campaign = Campaign(name=stamp, file_count=100_000, file_size=1_000_000, concurrency_steps=[4, 8],
                    step_files=50_000, checksum_mode="none")
campaign.save()
campaign.sources.set([src])
campaign.destinations.set([dst])
run = runs.start_run(campaign, trigger="command")
deadline = time.monotonic() + 180
while time.monotonic() < deadline:
    run.refresh_from_db()
    if run.state == "running" and run.files_done >= 20:
        break
    time.sleep(0.5)
print("BENCH " + json.dumps({"sessions": sessions, "cookie": settings.SESSION_COOKIE_NAME, "run": run.pk,
                             "state": run.state, "documents": list(chart_registry.RUN_DOCUMENTS)}))
"""

_RUN_STATE = r"""
import json, os
import django
django.setup()
from campaigns.models import Run
run = Run.objects.get(pk=int(os.environ["BENCH_RUN"]))
print("BENCH " + json.dumps({"state": run.state, "files_done": run.files_done}))
"""


# --- a viewer: plain HTTP over asyncio ------------------------------------------------------
async def _get(port: int, path: str, headers: dict) -> tuple[object, dict, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        lines = [f"GET {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        await writer.drain()
        data = await asyncio.wait_for(reader.read(), 60)
    finally:
        writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    got = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines)}
    return int(status_line.split()[1]), got, body


class Viewer:
    """One open run page: its cookie, its browser cache (ETags), its held timeline."""

    def __init__(self, port: int, cookie: str, run: int, documents: list[str], mode: tuple[bool, bool], out: list):
        self.port, self.run, self.documents, self.out = port, run, documents, out
        self.since, self.bundled = mode
        self.headers = {"Cookie": cookie, "Accept": "text/html"}
        self.kept: dict[str, tuple[str, bytes]] = {}  # path -> (etag, body): the browser's cache
        self.timeline: tuple[float, float] | None = None  # (last time, bucket) the page holds

    async def ask(self, label: str, path: str, extra: dict | None = None) -> tuple[object, bytes, float]:
        headers = {**self.headers, **(extra or {})}
        cached = self.kept.get(path)
        if cached:
            headers["If-None-Match"] = cached[0]
        started = time.perf_counter()
        try:
            status, got, body = await _get(self.port, path, headers)
        except (TimeoutError, OSError, ValueError, IndexError) as exc:
            status, got, body = type(exc).__name__, {}, b""
        ms = (time.perf_counter() - started) * 1000
        if status == 304 and cached:
            body = cached[1]
        elif status == 200 and "etag" in got:
            self.kept[path] = (got["etag"], body)
        self.out.append((label, ms, status, time.time()))
        return status, body, ms

    async def chart(self, name: str) -> float:
        path = f"/campaigns/runs/{self.run}/charts/{name}.json"
        if name == "timeline" and self.since and self.timeline:
            path += f"?since={self.timeline[0]}&bucket={self.timeline[1]}"
        status, body, ms = await self.ask(f"chart: {name}.json", path, {"Accept": "application/json"})
        if name == "timeline" and self.since and status in (200, 304):
            doc = json.loads(body)
            if doc.get("times"):
                self.timeline = (doc["times"][-1], doc["bucket_seconds"])
        return ms

    async def bundle(self) -> float:
        path = f"/campaigns/runs/{self.run}/charts.json?names={','.join(self.documents)}"
        if self.timeline:
            path += f"&since={self.timeline[0]}&bucket={self.timeline[1]}"
        status, body, ms = await self.ask("chart: all documents (one request)", path, {"Accept": "application/json"})
        if status in (200, 304):
            doc = json.loads(body)["docs"].get("timeline") or {}
            if doc.get("times"):
                self.timeline = (doc["times"][-1], doc["bucket_seconds"])
        return ms

    async def charts_round(self) -> None:
        started = time.perf_counter()
        if self.bundled:
            await self.bundle()
        else:
            await asyncio.gather(*(self.chart(name) for name in self.documents))
        self.out.append(("round: chart documents", (time.perf_counter() - started) * 1000, 200, time.time()))

    async def watch(self, arrive: float, until: float) -> None:
        await asyncio.sleep(arrive)
        await self.ask("page: first load", f"/campaigns/runs/{self.run}/")
        loop = asyncio.get_running_loop()
        tasks = [loop.create_task(self.ask("partial: transfers (on load)", f"/campaigns/runs/{self.run}/transfers/",
                                           {"HX-Request": "true"}))]  # fmt: skip

        async def progress() -> None:
            while time.monotonic() < until:
                await asyncio.sleep(PROGRESS_EVERY)
                if time.monotonic() >= until:
                    break
                await self.ask("poll: progress", f"/campaigns/runs/{self.run}/progress/", {"HX-Request": "true"})

        async def charts() -> None:
            while time.monotonic() < until:
                await self.charts_round()
                await asyncio.sleep(CHARTS_EVERY)

        tasks += [loop.create_task(progress()), loop.create_task(charts())]
        await asyncio.gather(*tasks)


def client_process(port: int, cookies: list[str], run: int, documents: list[str], mode: tuple, start: float,
                   seconds: float, arrive: float, queue) -> None:  # fmt: skip
    out: list = []

    async def main() -> None:
        until = start + seconds
        await asyncio.sleep(max(start - time.monotonic(), 0))
        viewers = [Viewer(port, c, run, documents, mode, out) for c in cookies]
        await asyncio.gather(*(v.watch(random.uniform(0, arrive), until) for v in viewers))

    asyncio.run(main())
    usage = resource.getrusage(resource.RUSAGE_SELF)
    queue.put((out, usage.ru_utime + usage.ru_stime))


# --- where the cores went ---------------------------------------------------------------------
class RoleCpu:
    """CPU seconds of the site's processes by role over a window, sampled every second: gunicorn
    replaces a worker after its 5,000 ± 500 requests (a few times a window at 300 viewers), and a
    worker gone by the window's end would take its seconds with it (its last second is lost)."""

    def __init__(self, root: int) -> None:
        self.root, self.first, self.last, self.role = root, {}, {}, {}
        self.stop = False
        self._sample(initial=True)

    def _sample(self, initial: bool = False) -> None:
        procs = _processes()
        children: dict[int, list[int]] = defaultdict(list)
        for pid, (ppid, _, _) in procs.items():
            children[ppid].append(pid)
        stack = [self.root]
        while stack:
            pid = stack.pop()
            stack.extend(children.get(pid, ()))
            if pid not in procs:
                continue
            _, cmd, cpu = procs[pid]
            self.first.setdefault(pid, cpu if initial else 0.0)
            self.last[pid] = cpu
            self.role.setdefault(pid, next((name for needle, name in _ROLES if needle in cmd), "other"))

    def run(self, seconds: float) -> dict[str, float]:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            time.sleep(min(1.0, max(end - time.monotonic(), 0)))
            self._sample()
        roles: dict[str, float] = defaultdict(float)
        for pid, cpu in self.last.items():
            roles[self.role[pid]] += cpu - self.first[pid]
        return dict(roles)


# --- one window -----------------------------------------------------------------------------
def window(site: Site, people: dict, viewers: int, seconds: float, processes: int, arrive: float) -> dict:
    run, cookie = people["run"], people["cookie"]
    # As this version's page does: the timeline from its last point on, all documents in one request.
    since = "sinceUrl" in (site.tree / "static" / "js" / "charts.js").read_text()
    bundled = "data-bundle" in (site.tree / "templates" / "campaigns" / "run_detail.html").read_text()
    cookies = [f"{cookie}={s}" for s in people["sessions"][:viewers]]
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    start = time.monotonic() + 2.0
    procs = [
        ctx.Process(target=client_process, args=(site.port, cookies[i::processes], run, people["documents"],
                                                 (since, bundled),
                                                 start, seconds, arrive, queue))
        for i in range(processes)
    ]  # fmt: skip
    for p in procs:
        p.start()
    time.sleep(max(start - time.monotonic(), 0))
    roles, machine_before = RoleCpu(site.process.pid), cpu_by_program()
    site_cpu = roles.run(seconds)
    machine_after = cpu_by_program()
    rows, client_cpu = [], 0.0
    for _ in procs:
        got, cpu = queue.get(timeout=seconds + 180)
        rows += got
        client_cpu += cpu
    for p in procs:
        p.join()
    after = in_tree(site.tree, _RUN_STATE, site.env, BENCH_RUN=str(run))
    by_label: dict[str, list[float]] = defaultdict(list)
    statuses: dict[str, int] = defaultdict(int)
    for label, ms, status, _ in rows:
        by_label[label].append(ms)
        if not label.startswith("round"):
            statuses[str(status)] += 1
    polls = sorted(ms for label, ms, _, _ in rows if label.startswith(("poll", "chart")))
    late_of = [ms for label, ms, _, _ in rows if label in ("poll: progress", "round: chart documents")]
    # The same after the arrival (every request answered from `settled` on, wall clock): what a
    # viewer who came earlier sees, set apart from the burst of three hundred arriving pages.
    settled = min(at for _, _, _, at in rows) + arrive + 10
    steady = sorted(ms for label, ms, _, at in rows if label.startswith(("poll", "chart")) and at >= settled)
    steady_late = [
        ms for label, ms, _, at in rows if label in ("poll: progress", "round: chart documents") and at >= settled
    ]
    pages = sorted(by_label["page: first load"])
    requests = sum(statuses.values())
    return {
        "viewers": viewers,
        "requests": requests,
        "rps": requests / seconds,
        "poll_p50": _pct(polls, 50),
        "poll_p95": _pct(polls, 95),
        "late": sum(ms > LATE_MS for ms in late_of) / max(len(late_of), 1),
        "polls": len(late_of),
        "steady_p95": _pct(steady, 95),
        "steady_late": sum(ms > LATE_MS for ms in steady_late) / max(len(steady_late), 1),
        "page_p50": _pct(pages, 50),
        "page_p95": _pct(pages, 95),
        "statuses": dict(statuses),
        "labels": {k: (len(v), _pct(sorted(v), 50), _pct(sorted(v), 95)) for k, v in by_label.items()},
        "client_cpu": client_cpu,
        "cpu": site_cpu,
        "machine": {k: machine_after[k] - machine_before.get(k, 0.0) for k in machine_after},
        "run_after": after,
        "since": since,
        "bundled": bundled,
    }


def print_window(label: str, r: dict, seconds: float) -> None:
    errors = sum(n for s, n in r["statuses"].items() if s not in ("200", "304"))
    print(
        f"  {label}, {r['viewers']} viewers: polls p50 {r['poll_p50']:.0f} ms, p95 {r['poll_p95']:.0f} ms; "
        f"{r['late']:.1%} of {r['polls']:,} polls > 1 s late; first page p50 {r['page_p50']:.0f} ms, "
        f"p95 {r['page_p95']:.0f} ms; {r['requests']:,} requests ({r['rps']:.0f}/s; 304: "
        f"{r['statuses'].get('304', 0):,}; errors {errors}); run {r['run_after']['state']} "
        f"({r['run_after']['files_done']:,} done); since={'yes' if r['since'] else 'no'}, "
        f"one request a round={'yes' if r['bundled'] else 'no'}"
    )
    for name, (n, p50, p95) in sorted(r["labels"].items()):
        print(f"      {name:<30} {n:>7}  p50 {p50:8.1f} ms  p95 {p95:8.1f} ms")
    print(
        f"      from 10 s after the arrival on: polls p95 {r['steady_p95']:.0f} ms, {r['steady_late']:.1%} > 1 s late"
    )
    cpu = ", ".join(f"{k} {v:.1f}" for k, v in sorted(r["cpu"].items(), key=lambda kv: -kv[1]) if v >= 0.05)
    print(f"      CPU s in the {seconds:.0f} s window: site by role: {cpu}; the clients: {r['client_cpu']:.1f}")
    machine = ", ".join(f"{k} {v:.1f}" for k, v in sorted(r["machine"].items(), key=lambda kv: -kv[1]) if v >= 0.5)
    print(f"      machine-wide by program: {machine}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", default="49f9bbb", help="the version before (this branch's base)")
    parser.add_argument("--viewers", default="100,300")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--arrive", type=float, default=1.0, help="the viewers arrive within this many seconds")
    parser.add_argument("--only", choices=("before", "after"))
    args = parser.parse_args()
    counts = [int(n) for n in args.viewers.split(",")]
    before_tree, before = reference_tree(args.before)
    print(f"before {before} ({before_tree}), after {head_label()} ({ROOT}); {os.cpu_count()} cores; "
          f"{args.processes} client processes; {args.seconds:.0f} s a window")  # fmt: skip
    results: dict[str, list[dict]] = {}
    for label, tree, db, redis_db in (
        ("before", before_tree, "storageops_viewers_before", 9),
        ("after", ROOT, "storageops_viewers_after", 10),
    ):
        if args.only and label != args.only:
            continue
        with Site(tree, f"viewers-{label}", db, redis_db) as site:
            people = in_tree(site.tree, _SETUP, site.env, timeout=400, BENCH_SESSIONS=str(max(counts)))
            if people["state"] != "running":
                raise RuntimeError(f"{label}: the mock run is not live ({people})")
            results[label] = []
            for n in counts:
                got = window(site, people, n, args.seconds, args.processes, args.arrive)
                results[label].append(got)
                print_window(label, got, args.seconds)
                time.sleep(5)  # the last polls drain
    out = ROOT / "var" / "bench" / f"viewers-{int(time.time())}.json"
    out.write_text(json.dumps(results, indent=1))
    if len(results) == 2:
        for b, a in zip(results["before"], results["after"], strict=True):
            print(
                f"{a['viewers']} viewers, after / before: poll p95 {a['poll_p95']:.0f} / {b['poll_p95']:.0f} ms "
                f"({a['poll_p95'] / b['poll_p95']:.2f}×), late {a['late']:.1%} / {b['late']:.1%}, first page p95 "
                f"{a['page_p95']:.0f} / {b['page_p95']:.0f} ms ({a['page_p95'] / b['page_p95']:.2f}×), requests/s "
                f"{a['rps']:.0f} / {b['rps']:.0f}"
            )
    print(f"raw figures: {out}")


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Today's code against a reference commit, side by side on this machine in one run.

Absolute figures differ threefold between machines of one kind, and this one is shared: a
figure means something only beside the reference's, measured in the same sitting. For each
site in turn (the reference's tree, a git worktree of `--reference`, and this working tree), on
a fresh PostgreSQL database of its own and a Redis database of its own:

- **load**: the site as `make run` starts it (its own `manage.py runsite`: gunicorn as that
  version configures it, a Celery worker, beat, the demo XRootD doors with whatever that
  version runs beside them -- collectors, pool clients -- and the demo run, live), then twenty
  closed-loop clients for `--seconds`, each a process of its own asking again as soon as it has
  read an answer: ten API clients with their own tokens in turn over the runs list, the
  campaigns list, the live run and its transfers; ten browser sessions over the live run's page
  and its progress partial (the run page polls it). The same URLs on both sites, so both do the
  same work as each version does it; times are the clients', from sending to having read.
- **bookkeeping**: each tree's own `benchmarks/engine_scale.py` case (a) (a real worker,
  100,000 instant mock copies, recorded transfers/s), in interleaved pairs.

Both figures and their ratio (working tree / reference) are printed.

    .venv/bin/python benchmarks/reference_compare.py [--reference c1eea49] [--what load,bookkeeping]
        [--seconds 30] [--pairs 1] [--bookkeeping-pairs 5] [--files 100000]
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import signal
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_STACKS = bool(os.environ.get("BENCH_PY_SPY"))
ADMIN_URL = "postgres://postgres@127.0.0.1:5432"
REDIS = "redis://127.0.0.1:6379"

# Run inside a site's tree (its own Django, its own models): a user with a token and a session.
_SETUP = r"""
import json, importlib, os, time
import django
django.setup()
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.auth.models import Group
from storageops.api.tokens import create_token
User = get_user_model()
# A site's staff: a role, not a superuser (whose permission checks skip the queries).
user = User.objects.update_or_create(username="bench", defaults={"is_superuser": False})[0]
user.groups.add(Group.objects.get(name="operator"))
sessions = []
for _ in range(int(os.environ["BENCH_SESSIONS"])):
    store = importlib.import_module(settings.SESSION_ENGINE).SessionStore()
    store[SESSION_KEY] = str(user.pk)
    store[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    store[HASH_SESSION_KEY] = user.get_session_auth_hash()
    store.create()
    sessions.append(store.session_key)
tokens = [create_token(user, f"bench {i}", "operator")[1] for i in range(int(os.environ["BENCH_TOKENS"]))]
print("BENCH " + json.dumps({"sessions": sessions, "tokens": tokens, "cookie": settings.SESSION_COOKIE_NAME}))
"""

_LIVE_RUN = r"""
import json, time
import django
django.setup()
from campaigns.models import Run
deadline = time.monotonic() + float(__import__("os").environ["BENCH_WAIT"])
while time.monotonic() < deadline:
    run = Run.objects.order_by("-pk").first()
    if run is not None and run.state == "running" and run.files_done > 0:
        break
    time.sleep(0.5)
print("BENCH " + json.dumps({"run": run.pk if run else None, "state": run.state if run else None}))
"""

_RUN_STATE = r"""
import json
import django
django.setup()
from campaigns.models import Run
run = Run.objects.get(pk=int(__import__("os").environ["BENCH_RUN"]))
print("BENCH " + json.dumps({"state": run.state, "files_done": run.files_done}))
"""

_BOOKKEEPING = r"""
import json, os, sys, tempfile
from pathlib import Path
sys.path[:0] = [os.path.join(os.getcwd(), "benchmarks")]
import engine_scale, harness
harness.setup()
from campaigns.models import Run
with tempfile.TemporaryDirectory() as tmp:
    worker = harness.start_worker("cmp", Path(tmp))
    try:
        run = engine_scale.mock_run("cmp-a", int(os.environ["BENCH_FILES"]), "time=0", 200)
        harness.wait_for_run(run.pk, timeout=1800)
    finally:
        worker.stop()
run = Run.objects.get(pk=run.pk)
elapsed = (run.finished_at - run.created).total_seconds()
print("BENCH " + json.dumps({"files": run.files_done, "seconds": elapsed, "rate": run.files_done / elapsed}))
"""


# --- the trees ------------------------------------------------------------------------------
def reference_tree(ref: str) -> tuple[Path, str]:
    """A worktree of `ref` under var/bench (made once, kept), with this tree's virtualenv."""
    sha = subprocess.run(["git", "rev-parse", ref], cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip()
    tree = ROOT / "var" / "bench" / f"ref-{sha[:10]}"
    if not (tree / "manage.py").exists():
        tree.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "worktree", "add", "--detach", str(tree), sha], cwd=ROOT, check=True)
    if not (tree / ".venv").exists():
        (tree / ".venv").symlink_to(ROOT / ".venv")
    return tree, sha[:10]


def head_label() -> str:
    sha = subprocess.run(["git", "rev-parse", "--short=10", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True)
    return sha.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


def fresh_database(name: str) -> str:
    import psycopg

    with psycopg.connect(f"{ADMIN_URL}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{ADMIN_URL}/{name}"


def site_env(db_url: str, redis_db: int) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STORAGEOPS_", "DJANGO_"))}
    env.update(
        DATABASE_URL=db_url,
        CELERY_BROKER_URL=f"{REDIS}/{redis_db}",
        DJANGO_SETTINGS_MODULE="storageops.settings",
        GFAL_PYTHONBIN="/usr/bin/python3",
        ALLOWED_HOSTS="127.0.0.1,localhost",
        PYTHONUNBUFFERED="1",
    )
    return env


def in_tree(tree: Path, code: str, env: dict, timeout: float = 600, **extra: str) -> dict:
    """Run `code` with the tree's Python and Django; the dict it prints after 'BENCH '."""
    out = subprocess.run(
        [str(tree / ".venv" / "bin" / "python"), "-c", code],
        cwd=tree, env={**env, **extra}, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    for line in out.stdout.splitlines():
        if line.startswith("BENCH "):
            return json.loads(line[6:])
    raise RuntimeError(f"in {tree}: {out.stderr[-3000:]}")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Site:
    """One version's `make run` site on a fresh database, started and stopped by its pid."""

    def __init__(self, tree: Path, label: str, db: str, redis_db: int, extra_env: dict | None = None) -> None:
        self.tree, self.label = tree, label
        self.env = {**site_env(fresh_database(db), redis_db), **(extra_env or {})}
        self.port = free_port()
        self.log = ROOT / "var" / "bench" / f"site-{label}.log"
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> Site:
        python = str(self.tree / ".venv" / "bin" / "python")
        subprocess.run([python, "manage.py", "migrate", "-v", "0"], cwd=self.tree, env=self.env, check=True)
        subprocess.run([python, "manage.py", "collectstatic", "--noinput", "-v", "0"], cwd=self.tree, env=self.env)
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [python, "manage.py", "runsite", "--bind", f"127.0.0.1:{self.port}"],
            cwd=self.tree, env=self.env, stdout=self.log.open("w"), stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.label}: runsite exited: {self.log.read_text()[-3000:]}")
            try:
                if _status(self.port, "/healthz", {}) == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.5)
        raise TimeoutError(f"{self.label}: no /healthz in 180 s")

    def __exit__(self, *exc) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(90)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


# --- where the cores went: CPU seconds of the site's processes, by role ---------------------
_ROLES = (
    ("gunicorn", "web"), ("beat", "beat"), ("worker", "worker"), ("collector", "collectors"),
    (" client", "pool clients"), ("xrootd", "doors"), ("runsite", "supervisor"),
)  # fmt: skip


def _processes() -> dict[int, tuple[int, str, float]]:
    """pid -> (parent pid, command line, CPU seconds so far) of every process: its own and that of
    the children it has reaped (gunicorn replaces a web process every max_requests: without
    them, the CPU of one that ended in the window was lost, and a window's sum could go negative)."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        out[int(entry.name)] = (int(fields[1]), cmd, sum(int(f) for f in fields[11:15]) / tick)
    return out


def cpu_by_program() -> dict[str, float]:
    """CPU seconds so far of every process on the machine, by program (PostgreSQL's backends,
    the load's own clients, …): what else took the cores."""
    programs: dict[str, float] = defaultdict(float)
    for _, cmd, seconds in _processes().values():
        head = cmd.split(" ", 1)[0].rsplit("/", 1)[-1] or "?"
        if head.startswith("postgres"):
            head = "postgres"
        elif "reference_compare" in cmd:
            head = "load clients"
        programs[head] += seconds
    return programs


def cpu_by_role(root: int) -> dict[str, float]:
    """CPU seconds used so far by `root` and its descendants, summed per role."""
    procs = _processes()
    children: dict[int, list[int]] = defaultdict(list)
    for pid, (ppid, _, _) in procs.items():
        children[ppid].append(pid)
    roles: dict[str, float] = defaultdict(float)
    stack = [root]
    while stack:
        pid = stack.pop()
        stack.extend(children.get(pid, ()))
        if pid not in procs:
            continue
        cmd = procs[pid][1]
        role = next((name for needle, name in _ROLES if needle in cmd), "other")
        roles[role] += procs[pid][2]
    return roles


# --- the clients ----------------------------------------------------------------------------
def _status(port: int, path: str, headers: dict) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def client(port: int, plan: list[tuple[str, str]], headers: dict, until: float, queue) -> None:
    """Closed loop: each request as soon as the last was read, over `plan` in turn, until `until`
    (time.monotonic()). A kept-alive connection the server closed is opened again and the request
    sent again, as browsers do; only a fresh connection's failure or an answer not 200 is an error."""
    out: list = []
    conn: http.client.HTTPConnection | None = None
    i = 0
    while time.monotonic() < until:
        label, path = plan[i % len(plan)]
        i += 1
        started = time.perf_counter()
        status: int | str = "none"
        for fresh in (conn is None, True):
            if fresh:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            try:
                conn.request("GET", path, headers=headers)
                response = conn.getresponse()
                response.read()
                status = response.status
                if response.getheader("Connection", "").lower() == "close":
                    conn.close()
                    conn = None
                break
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                conn = None
                status = type(exc).__name__
                if fresh:
                    break
        out.append((label, (time.perf_counter() - started) * 1000, status, time.monotonic()))
    queue.put(out)


def web_workers(root: int) -> list[int]:
    """The gunicorn worker processes under `root` (a gunicorn process whose parent is one)."""
    procs = _processes()
    return [
        pid for pid, (ppid, cmd, _) in procs.items() if "gunicorn" in cmd and "gunicorn" in procs.get(ppid, (0, ""))[1]
    ]


def sample_stacks(pids: list[int], seconds: float, out: Path) -> list[subprocess.Popen]:
    """py-spy (when installed) samples each web worker's stacks for `seconds`: collapsed stacks."""
    spy = ROOT / ".venv" / "bin" / "py-spy"
    if not spy.exists():
        return []
    out.mkdir(parents=True, exist_ok=True)
    # GIL samples only: where the workers' CPU goes, not where they wait. BENCH_PY_SPY=all samples
    # every running thread instead (waits in the driver included); it costs the machine more.
    only_gil = ["--gil"] if os.environ.get("BENCH_PY_SPY") != "all" else []
    argv = [str(spy), "record", *only_gil, "-r", "100", "-d", str(int(seconds)), "-f", "raw"]
    return [
        subprocess.Popen(
            [*argv, "-o", str(out / f"{pid}.txt"), "-p", str(pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        for pid in pids
    ]


# Where a web worker's samples fall: (stage, a frame that marks it); a sample counts for the first
# stage listed that any of its frames matches (so the database inside a serializer is database).
STACK_STAGES = (
    ("waiting for a request (idle)",
     ("wait (selectors.py", "accept (socket.py", "sleep (gunicorn", "select (selectors.py")),
    ("database (driver)", ("psycopg/",)),
    ("SQL compiler (ORM)", ("django/db/models/sql/",)),
    ("ORM other", ("django/db/models/",)),
    ("templates", ("django/template/",)),
    ("serializers", ("rest_framework/serializers.py", "rest_framework/fields.py", "rest_framework/relations.py")),
    ("JSON", ("json/", "rest_framework/renderers.py")),
    ("auth, sessions, roles",
     ("contrib/auth", "contrib/sessions", "storageops/api/auth.py", "storageops/api/tokens.py", "storageops/grants.py",
      "storageops/access.py")),
    ("middleware (other)", ("django/middleware/", "csp/", "whitenoise/", "storageops/limits.py")),
    ("project code", ("campaigns/", "collectors/", "storageops/", "alerts/")),
    ("DRF other", ("rest_framework/",)),
    ("gunicorn (HTTP)", ("gunicorn/",)),
    ("Django other", ("django/",)),
)  # fmt: skip


def stack_stages(folder: Path) -> dict[str, float]:
    """Share of the web workers' samples per stage (collapsed stacks: 'frame;frame;… count')."""
    counts: dict[str, int] = defaultdict(int)
    total = 0
    for file in folder.glob("*.txt"):
        for line in file.read_text(errors="replace").splitlines():
            stack, _, n = line.rpartition(" ")
            if not n.isdigit():
                continue
            total += int(n)
            frames = stack.split(";")
            leaf = frames[-1] if frames else ""
            stage = "other"
            for name, needles in STACK_STAGES:
                # idle is judged on the leaf alone: a request is never "idle" below its frames
                hay = leaf if name.startswith("waiting") else stack
                if any(needle in hay for needle in needles):
                    stage = name
                    break
            counts[stage] += int(n)
    return {k: v / total for k, v in counts.items()} if total else {}


def db_counters(db_url: str) -> dict[str, int]:
    """PostgreSQL's own counters of the site's database: transactions (each query of an
    autocommit connection is one), rows returned and fetched."""
    import psycopg

    with psycopg.connect(db_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT xact_commit + xact_rollback, tup_returned, tup_fetched, sessions FROM pg_stat_database "
            "WHERE datname = current_database()"
        ).fetchone()
    return {"transactions": row[0], "rows returned": row[1], "rows fetched": row[2], "connections opened": row[3]}


def load(site: Site, seconds: float, clients: int, mix: str = "all") -> dict:
    """Twenty closed-loop clients against `site`'s live demo run; the figures of the window.

    `mix`: "all" (half API clients, half browser sessions), or the start of one request kind's
    label ("partial", "page", "API runs", …): every client asks only that, so the web CPU of one
    kind can be set beside the reference's."""
    people = in_tree(site.tree, _SETUP, site.env, BENCH_SESSIONS=str(clients), BENCH_TOKENS=str(clients))
    live = in_tree(site.tree, _LIVE_RUN, site.env, BENCH_WAIT="240")
    if live["state"] != "running":
        raise RuntimeError(f"{site.label}: the demo run is not live ({live})")
    run = live["run"]
    api = [
        ("API runs list", "/api/v1/runs/"),
        ("API campaigns list", "/api/v1/campaigns/"),
        ("API the live run", f"/api/v1/runs/{run}/"),
        ("API its transfers", f"/api/v1/transfers/?run={run}"),
    ]
    browser = [("page: the live run", f"/campaigns/runs/{run}/")] + [
        ("partial: progress", f"/campaigns/runs/{run}/progress/")
    ] * 3
    # Warm each path (templates, per-process caches) as a site serving for days has.
    for _, path in api:
        for _ in range(6):
            _status(site.port, path, {"Authorization": f"Token {people['tokens'][0]}"})
    for _, path in browser[:2]:
        for _ in range(6):
            _status(site.port, path, {"Cookie": f"{people['cookie']}={people['sessions'][0]}"})
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    start = time.monotonic() + 1.0
    until = start + seconds
    procs = []
    kinds = [(entry, True) for entry in api] + [(entry, False) for entry in browser[:2]]
    only = [(entry, is_api) for entry, is_api in kinds if entry[0].startswith(mix)] if mix != "all" else []
    if mix != "all" and not only:
        raise SystemExit(f"--mix {mix!r} names no request kind: {', '.join(e[0] for e, _ in kinds)}")
    for n in range(clients):
        if only:
            (entry, is_api) = only[0]
            plan = [entry]
            headers = (
                {"Authorization": f"Token {people['tokens'][n]}"}
                if is_api
                else {"Cookie": f"{people['cookie']}={people['sessions'][n]}"}
            )
        elif n % 2 == 0:
            plan, headers = (
                api[n // 2 % len(api) :] + api[: n // 2 % len(api)],
                {"Authorization": f"Token {people['tokens'][n]}"},
            )
        else:
            plan, headers = browser, {"Cookie": f"{people['cookie']}={people['sessions'][n]}"}
        p = ctx.Process(target=_delayed_client, args=(site.port, plan, headers, start, until, queue))
        p.start()
        procs.append(p)
    time.sleep(max(start - time.monotonic(), 0))
    cpu_before, machine_before = cpu_by_role(site.process.pid), cpu_by_program()
    db_before = db_counters(site.env["DATABASE_URL"])
    stacks = ROOT / "var" / "bench" / f"stacks-{site.label}-{int(time.time())}"
    spies = sample_stacks(web_workers(site.process.pid), seconds - 1, stacks) if SAMPLE_STACKS else []
    time.sleep(max(until - time.monotonic(), 0))
    cpu_after, machine_after = cpu_by_role(site.process.pid), cpu_by_program()
    db_after = db_counters(site.env["DATABASE_URL"])
    rows = [r for _ in procs for r in queue.get(timeout=seconds + 120)]
    for spy in spies:
        spy.wait(60)
    for p in procs:
        p.join()
    after = in_tree(site.tree, _RUN_STATE, site.env, BENCH_RUN=str(run))
    by_label: dict[str, list[float]] = defaultdict(list)
    errors = 0
    for label, ms, status, _ in rows:
        by_label[label].append(ms)
        errors += status != 200
    every = sorted(ms for _, ms, _, _ in rows)
    return {
        "requests": len(rows),
        "rps": len(rows) / seconds,
        "p50": _pct(every, 50),
        "p95": _pct(every, 95),
        "errors": errors,
        "labels": {k: (len(v), _pct(sorted(v), 50), _pct(sorted(v), 95)) for k, v in by_label.items()},
        "run": run,
        "run_after": after,
        "cpu": {k: cpu_after.get(k, 0.0) - cpu_before.get(k, 0.0) for k in cpu_after},
        "stages": stack_stages(stacks) if spies else {},
        "machine": {k: machine_after[k] - machine_before.get(k, 0.0) for k in machine_after},
        "db": {k: db_after[k] - db_before[k] for k in db_after},
    }


def _delayed_client(port, plan, headers, start, until, queue) -> None:
    time.sleep(max(start - time.monotonic(), 0))
    client(port, plan, headers, until, queue)


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    return values[max(0, min(len(values) - 1, round(q / 100 * len(values)) - 1))]


# --- the report -----------------------------------------------------------------------------
def print_load(label: str, r: dict) -> None:
    print(
        f"  {label}: {r['requests']:,} requests in the window, {r['rps']:.1f}/s, p50 {r['p50']:.1f} ms, "
        f"p95 {r['p95']:.1f} ms, {r['errors']} errors; demo run #{r['run']} "
        f"{r['run_after']['state']} after ({r['run_after']['files_done']} files done)"
    )
    for name, (n, p50, p95) in sorted(r["labels"].items()):
        print(f"      {name:<22} {n:>6}  p50 {p50:7.1f} ms  p95 {p95:7.1f} ms")
    cpu = ", ".join(f"{k} {v:.1f}" for k, v in sorted(r["cpu"].items(), key=lambda kv: -kv[1]) if v >= 0.05)
    print(f"      CPU seconds in the window, by role: {cpu}")
    machine = ", ".join(f"{k} {v:.1f}" for k, v in sorted(r["machine"].items(), key=lambda kv: -kv[1]) if v >= 0.2)
    print(f"      CPU seconds in the window, machine-wide by program: {machine}")
    per_request = r["cpu"].get("web", 0.0) / r["requests"] * 1000 if r["requests"] else float("nan")
    print(f"      web CPU per request: {per_request:.2f} ms")
    n = max(r["requests"], 1)
    db = ", ".join(f"{k} {v / n:,.1f}" for k, v in r["db"].items())
    print(f"      the site's database, per request (its worker, beat and collectors included): {db}")
    if r["stages"]:
        busy = 1 - r["stages"].get("waiting for a request (idle)", 0.0)
        print("      web workers' samples (py-spy), per stage, % of busy samples and ms of CPU per request:")
        for name, share in sorted(r["stages"].items(), key=lambda kv: -kv[1]):
            if name.startswith("waiting"):
                continue
            print(f"        {name:<28} {share / busy:6.1%}  {share / busy * per_request:6.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reference", default="c1eea49")
    parser.add_argument("--what", default="load,bookkeeping")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--pairs", type=int, default=1, help="load: reference then working tree, this many times")
    parser.add_argument("--bookkeeping-pairs", type=int, default=5)
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--only", choices=("reference", "working"), help="load: one of the two sites")
    parser.add_argument(
        "--mix", default="all",
        help="load: 'all', or the start of one request kind's label (partial, page, 'API runs', …) for every client",
    )  # fmt: skip
    parser.add_argument(
        "--working-env", action="append", default=[], metavar="NAME=VALUE",
        help="load: an environment variable for the working tree's site (e.g. STORAGEOPS_WEB_THREADS=1)",
    )  # fmt: skip
    args = parser.parse_args()
    working_env = dict(item.split("=", 1) for item in args.working_env)
    what = set(args.what.split(","))
    ref_tree, ref = reference_tree(args.reference)
    head = head_label()
    print(f"reference {ref} ({ref_tree}) against the working tree {head} ({ROOT}); {os.cpu_count()} cores")
    if "load" in what:
        print(f"\nload: {args.clients} closed-loop clients for {args.seconds:.0f} s against each make-run site")
        ratios = []
        for pair in range(args.pairs):
            got = {}
            for label, tree, db, redis_db in (
                ("reference", ref_tree, "storageops_cmp_ref", 13),
                ("working", ROOT, "storageops_cmp_cur", 14),
            ):
                if args.only and label != args.only:
                    continue
                with Site(tree, label, db, redis_db, working_env if label == "working" else None) as site:
                    got[label] = load(site, args.seconds, args.clients, args.mix)
                print_load(f"pair {pair + 1} {label}", got[label])
            if args.only:
                continue
            ratio = got["working"]["rps"] / got["reference"]["rps"]
            ratios.append(ratio)
            print(
                f"  pair {pair + 1}: requests/s working / reference = {ratio:.2f}; p95 {got['working']['p95']:.0f} "
                f"vs {got['reference']['p95']:.0f} ms"
            )
        print(f"load ratio (working / reference), per pair: {' · '.join(f'{r:.2f}' for r in ratios)}")
    if "bookkeeping" in what:
        print(
            f"\nbookkeeping: engine_scale (a), {args.files:,} instant copies, "
            f"{args.bookkeeping_pairs} interleaved pairs"
        )
        rates: dict[str, list[float]] = {"reference": [], "working": []}
        for pair in range(args.bookkeeping_pairs):
            order = (("reference", ref_tree, 15), ("working", ROOT, 15))
            if pair % 2:
                order = order[::-1]  # neither always goes first on a machine that warms up
            for label, tree, redis_db in order:
                env = site_env(fresh_database(f"storageops_cmp_book_{label}"), redis_db)
                got = in_tree(tree, _BOOKKEEPING, env, timeout=3600, BENCH_FILES=str(args.files))
                rates[label].append(got["rate"])
                print(
                    f"  pair {pair + 1} {label}: {got['files']:,} recorded in {got['seconds']:.1f} s "
                    f"-> {got['rate']:,.0f}/s"
                )
        for label, values in rates.items():
            print(f"  {label}: {' · '.join(f'{v:,.0f}' for v in values)}/s, median {statistics.median(values):,.0f}/s")
        pairs = [w / r for r, w in zip(rates["reference"], rates["working"], strict=True)]
        print(
            f"bookkeeping ratio (working / reference), per pair: {' · '.join(f'{p:.2f}' for p in pairs)}; "
            f"median {statistics.median(pairs):.2f}"
        )


if __name__ == "__main__":
    sys.exit(main())

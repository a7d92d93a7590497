#!/usr/bin/env python3
"""Where a request's time goes, stage by stage, in one tree or beside a reference's.

Each request of the load mix (benchmarks/reference_compare.py) is served `--repeat` times through
Django's whole stack in-process (django.test.Client: every middleware, the view, the template or
the serializer, the queries), under cProfile, after warming up. For each it prints the time per
request, its queries, and the time spent in each stage: the middleware (each class, its own code
and what it calls but the view), authentication and the role check, CSP, the view, template
rendering, serializers, and the database (time inside the driver's execute).

    .venv/bin/python benchmarks/request_profile.py --database storageops_cmp_cur [--tree PATH]
        [--repeat 200] [--top 25]

It reads the site a load run left (its newest run is "the live run"), so both trees are profiled
on what their own sites wrote. `--tree` runs it on another checkout (a reference's worktree):
that tree's code, this script.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Each stage: the functions whose time is its time (the outermost call counts; a render inside
# a render, or a stage's function calling another of the same stage, once). Stages nest (the
# database inside a serializer inside the view): each is the time spent inside it.
STAGES = {
    "sessions": [
        ("django.contrib.sessions.backends.base", "SessionBase", "_get_session"),
        ("django.contrib.sessions.backends.db", "SessionStore", "save"),
    ],
    "auth": [
        ("django.contrib.auth", None, "get_user"),
        ("rest_framework.request", "Request", "_authenticate"),
    ],
    "roles": [
        ("storageops.api.auth", "RolePermission", "has_permission"),
        ("storageops.api.tokens", None, "user_role"),
        ("storageops.access", "RoleRequiredMiddleware", "process_view"),
    ],
    "csp": [("csp.middleware", "CSPMiddleware", "process_response")],
    "csrf": [
        ("django.middleware.csrf", "CsrfViewMiddleware", "process_view"),
        ("django.middleware.csrf", "CsrfViewMiddleware", "process_response"),
    ],
    "templates": [("django.template.backends.django", "Template", "render")],
    "serializers": [
        ("rest_framework.serializers", "ListSerializer", "to_representation"),
        ("rest_framework.serializers", "Serializer", "to_representation"),
    ],
    "json": [("rest_framework.renderers", "JSONRenderer", "render")],
    "view": [("django.core.handlers.base", "BaseHandler", "_get_response")],
}


class Stages:
    """Wraps each stage's functions with a timer (per stage, the outermost call only)."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(STAGES, 0.0)
        self.depth = dict.fromkeys(STAGES, 0)
        self.queries = 0
        self.db = 0.0
        self.gc = 0.0
        self._gc_started = 0.0

    def install(self) -> list[str]:
        import importlib

        missing = []
        for stage, targets in STAGES.items():
            for module_name, cls_name, func in targets:
                try:
                    module = importlib.import_module(module_name)
                except ImportError:
                    missing.append(f"{module_name}.{func}")
                    continue
                owner = getattr(module, cls_name) if cls_name else module
                if not hasattr(owner, func):
                    missing.append(f"{module_name}.{cls_name}.{func}")
                    continue
                setattr(owner, func, self._timed(stage, getattr(owner, func)))
        return missing

    def _timed(self, stage: str, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if self.depth[stage]:
                return fn(*args, **kwargs)
            self.depth[stage] += 1
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[stage] += time.perf_counter() - started
                self.depth[stage] -= 1

        return wrapper

    def execute(self, execute, sql, params, many, context):
        """A connection.execute_wrapper: counts the queries and their time."""
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.db += time.perf_counter() - started
            self.queries += 1

    def reset(self) -> None:
        self.seconds = dict.fromkeys(STAGES, 0.0)
        self.queries, self.db, self.gc = 0, 0.0, 0.0

    def on_gc(self, phase: str, info: dict) -> None:
        """A gc.callbacks hook: the time of the collector's passes (no function owns it)."""
        if phase == "start":
            self._gc_started = time.perf_counter()
        else:
            self.gc += time.perf_counter() - self._gc_started


def build_requests(repeat: int):
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.test import Client

    from campaigns.models import Run
    from storageops.api.tokens import create_token

    User = get_user_model()
    # A site's staff: a role, not a superuser (whose permission checks skip the queries).
    user = User.objects.update_or_create(username="bench", defaults={"is_superuser": False})[0]
    user.groups.add(Group.objects.get(name="operator"))
    secret = create_token(user, "profile", "operator")[1]
    run = Run.objects.order_by("-pk").first()
    browser = Client()
    browser.force_login(user)
    api = Client(HTTP_AUTHORIZATION=f"Token {secret}")
    return run, [
        ("API runs list", api, "/api/v1/runs/"),
        ("API campaigns list", api, "/api/v1/campaigns/"),
        ("API the live run", api, f"/api/v1/runs/{run.pk}/"),
        ("API its transfers", api, f"/api/v1/transfers/?run={run.pk}"),
        ("page: the live run", browser, f"/campaigns/runs/{run.pk}/"),
        ("partial: progress", browser, f"/campaigns/runs/{run.pk}/progress/"),
    ]


def profile(repeat: int, top: int) -> None:
    import django

    django.setup()
    import gc

    from django.db import connection

    stages = Stages()
    missing = stages.install()
    gc.callbacks.append(stages.on_gc)
    run, requests = build_requests(repeat)
    if os.environ.get("PROFILE_GC_FREEZE"):
        gc.collect()
        gc.freeze()
    print(f"objects tracked by the collector: {len(gc.get_objects()):,}; frozen: {gc.get_freeze_count():,}")
    print(f"run #{run.pk} ({run.state}, {run.files_done} files done); {repeat} requests each, ms per request")
    if missing:
        print(f"(not in this tree: {', '.join(missing)})")
    names = [*STAGES, "database", "gc"]
    print(f"{'request':<22} {'ms/req':>7} {'queries':>7}  " + " ".join(f"{n:>11}" for n in names))
    with connection.execute_wrapper(stages.execute):
        for label, client, path in requests:
            for _ in range(5):
                assert client.get(path).status_code == 200, (label, path)
            stages.reset()
            profiler = cProfile.Profile() if top else None
            started = time.perf_counter()
            if profiler:
                profiler.enable()
            for _ in range(repeat):
                client.get(path)
            if profiler:
                profiler.disable()
            wall = (time.perf_counter() - started) / repeat * 1000
            cells = " ".join(f"{stages.seconds[n] / repeat * 1000:>11.2f}" for n in STAGES)
            print(
                f"{label:<22} {wall:>7.2f} {stages.queries / repeat:>7.1f}  {cells} "
                f"{stages.db / repeat * 1000:>11.2f} {stages.gc / repeat * 1000:>11.2f}"
            )
            if profiler and os.environ.get("PROFILE_DUMP"):
                profiler.dump_stats(f"{os.environ['PROFILE_DUMP']}-{label.replace(' ', '_').replace(':', '')}.prof")
            if profiler:
                buffer = io.StringIO()
                pstats.Stats(profiler, stream=buffer).sort_stats(os.environ.get("PROFILE_SORT", "tottime")).print_stats(
                    os.environ.get("PROFILE_FILTER", ""), top
                )
                print(buffer.getvalue().split("\n", 6)[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", required=True, help="a database a load run left (storageops_cmp_cur …)")
    parser.add_argument("--tree", type=lambda p: Path(p).resolve(), default=ROOT)
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--top", type=int, default=0, help="also the N functions with the most own time")
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.inside:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("STORAGEOPS_", "DJANGO_"))}
        env.update(
            DATABASE_URL=f"postgres://postgres@127.0.0.1:5432/{args.database}",
            CELERY_BROKER_URL=os.environ.get("CELERY_BROKER_URL", "redis://127.0.0.1:6379/14"),
            DJANGO_SETTINGS_MODULE="storageops.settings",
            ALLOWED_HOSTS="testserver,127.0.0.1",
            GFAL_PYTHONBIN="/usr/bin/python3",
        )
        argv = [str(args.tree / ".venv" / "bin" / "python"), str(Path(__file__).resolve()), "--inside"]
        argv += ["--database", args.database, "--repeat", str(args.repeat), "--top", str(args.top)]
        sys.exit(subprocess.run(argv, cwd=args.tree, env=env).returncode)
    sys.path.insert(0, os.getcwd())
    profile(args.repeat, args.top)


if __name__ == "__main__":
    main()

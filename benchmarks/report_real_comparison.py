#!/usr/bin/env python3
"""A comparison report of three REAL backends, opened offline in Chromium, against the dashboard.

Four XRootD daemons on free loopback ports (run as nobody when we are root, stopped by pid at
the end): a source door serving root:// and https, and three destination doors, each a backend
of its own:

* A "xrootd-root":      plain root://, third-party copy (the destination pulls with xrdcp);
* B "xrootd-davs":      reached over davs:// (https with the throw-away CA), HTTP-TPC pull;
* C "xrootd-davs-capped": davs:// HTTP-TPC pull into a door behind XrdThrottle (--throttle-mb
  MB/s), the way sites cap a door. (The throttle wraps the door's file system, which an HTTP-TPC
  pull writes through; a root:// TPC pull is written by the door's xrdcp --server and is not
  capped, so C over root:// looked the same as A.)

One campaign per backend (same source door: its root:// face for A, its davs:// face for B, C),
--files x --size-mib MiB, a concurrency sweep 1, 2, 4, adler32 on both ends, each run driven
to its end in this process by the run driver (RunDriver(run.pk).drive(), as the tests do, so no
worker is needed). Then the comparison's report is made by the compare page's own download view
(/campaigns/compare/report.html, campaigns.reports), written to a file and opened from file://
in Chromium with every request but the file itself aborted: every chart must have drawn data,
and the report's table and per-step figures must equal the compare page's (rendered by Django's
test Client for a logged-in viewer) and its data.json. The PDF is printed by the same route.

    .venv/bin/python benchmarks/report_real_comparison.py [--files 12] [--size-mib 8] [--throttle-mb 8]
    .venv/bin/python benchmarks/report_real_comparison.py --runs 15,16,17   # the report half again

Uses DATABASE_URL and CELERY_BROKER_URL from the environment (migrated if needed; unset, the
benchmarks' storageops_bench, as benchmarks/harness.py sets). The davs endpoints carry a bearer
token: the report must not hold it. Writes
docs/screenshots/report-real-comparison.png and report-real-comparison-pdf.png (page 1).
"""

from __future__ import annotations

import argparse
import html
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import harness

SCREENSHOTS = harness.ROOT / "docs" / "screenshots"
MIB = 1024**2
STEPS = [1, 2, 4]
CHARTS = ("compare-steps", "compare-time")


# -- the doors --------------------------------------------------------------------------------------
def start_doors(base: Path, throttle_bps: int) -> dict:
    from devsite.xrootd_server import XRootDServer, make_test_ca, throttle_config

    ca = make_test_ca(base / "ca")
    doors = {}
    plan = {
        "source": {"https": ca},
        "root": {},
        "davs": {"https": ca},
        "throttled": {"https": ca, "extra_config": throttle_config(throttle_bps)},
    }
    try:
        for name, options in plan.items():
            doors[name] = XRootDServer(name, base / name, workdir=base / f"{name}-run", **options).start()
    except BaseException:
        stop_doors(doors)
        raise
    return {"ca": ca, **doors}


def stop_doors(doors: dict) -> None:
    for door in doors.values():
        if hasattr(door, "stop"):
            door.stop()  # by its recorded pid's group, never by name


# -- the runs ---------------------------------------------------------------------------------------
def make_campaigns(doors: dict, files: int, size: int, stamp: str) -> list:
    from campaigns.models import Backend, Campaign, Endpoint

    # XrdHttpTPC pulls only with an Authorization to pass on (any bearer token: the doors check none).
    davs = {"ca_dir": str(doors["ca"].ca_dir), "bearer_token": f"{stamp}-token"}
    source_backend, _ = Backend.objects.get_or_create(name="source-xrootd", defaults={"access_layer": "xrootd"})
    src_root = Endpoint.objects.create(
        name=f"{stamp}-source-root", backend=source_backend, url=doors["source"].root_url_for("/data/")
    )
    src_davs = Endpoint.objects.create(
        name=f"{stamp}-source-davs", backend=source_backend, url=doors["source"].davs_url_for("/data/"), **davs
    )
    destinations = [
        ("xrootd-root", src_root, doors["root"].root_url_for("/data/"), {}),
        ("xrootd-davs", src_davs, doors["davs"].davs_url_for("/data/"), davs),
        ("xrootd-davs-capped", src_davs, doors["throttled"].davs_url_for("/data/"), davs),
    ]
    campaigns = []
    for backend_name, source, url, extra in destinations:
        backend, _ = Backend.objects.get_or_create(name=backend_name, defaults={"access_layer": "xrootd"})
        dst = Endpoint.objects.create(name=f"{stamp}-{backend_name}", backend=backend, url=url, **extra)
        short = backend_name.removeprefix("xrootd-")
        campaign = Campaign(
            name=f"{stamp}-{short}", engine="gfal2", source_path="src", destination_path="cmp",
            create_sources=True, file_count=files, file_size=size, checksum_mode="both",
            checksum_algorithm="adler32", tpc_mode="pull", concurrency_steps=STEPS, step_files=files // len(STEPS),
        )  # fmt: skip
        campaign.full_clean(exclude=["sources", "destinations"])
        campaign.save()
        campaign.sources.set([source])
        campaign.destinations.set([dst])
        campaigns.append(campaign)
    return campaigns


def drive(campaign):
    from campaigns import runs
    from campaigns.choices import RunState
    from campaigns.models import Run
    from campaigns.runs.lifecycle import RunDriver

    run = runs.create_run(campaign, trigger="command")
    RunDriver(run.pk).drive()
    run = Run.objects.select_related("campaign").get(pk=run.pk)
    if run.state != RunState.SUCCEEDED or run.files_done != campaign.file_count:
        errors = list(run.transfers.exclude(state="succeeded").values_list("error_message", flat=True)[:3])
        raise SystemExit(
            f"run {run.pk} {campaign.name} {run.state}, {run.files_done} done: {run.error[-1500:]} {errors}"
        )
    return run


# -- the dashboard's side ---------------------------------------------------------------------------
def viewer_client():
    from django.contrib.auth.models import Group, User
    from django.test import Client

    from storageops import roles

    user, _ = User.objects.get_or_create(username="report-real-viewer")
    user.groups.add(Group.objects.get(name=roles.VIEWER))
    client = Client()
    client.force_login(user)
    return client


def cells(document: str, table_id: str) -> list[list[str]]:
    """Each body row of one table: its header and its cells' text."""
    table = re.search(rf'<table[^>]* id="{table_id}"[^>]*>(.*?)</table>', document, re.S).group(1)
    body = re.search(r"<tbody>(.*?)</tbody>", table, re.S).group(1)
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S)
    return [[_text(c) for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", r, re.S)] for r in rows]


def _text(cell: str) -> str:
    """A cell's text as a browser shows it: tags gone, entities decoded, white space collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", cell)).split())


# -- the browser's side -----------------------------------------------------------------------------
def open_offline(report: Path, screenshot: Path) -> tuple[dict, list[list[str]], list[str], list[str]]:
    """The report from file:// with every other request aborted: each chart's datasets, the table."""
    from playwright.sync_api import sync_playwright

    from devsite.browser import CHROMIUM, CHROMIUM_ARGS

    url, refused, errors = report.as_uri(), [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.route("**/*", lambda r: r.continue_() if r.request.url == url else (refused.append(r), r.abort()))
            page.goto(url)
            drawn = {}
            for name in CHARTS:
                chart = f"document.querySelector('canvas[data-chart=\"{name}\"]')._chart"
                page.wait_for_function(f"() => {chart} !== undefined", timeout=15_000)
                drawn[name] = page.evaluate(f"() => {chart}.data.datasets.map(d => ({{label: d.label, data: d.data}}))")
            table = [r.locator("th, td").all_inner_texts() for r in page.locator("#compare-table tbody tr").all()]
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(screenshot), full_page=True)
        finally:
            browser.close()
    return drawn, [[" ".join(c.split()) for c in row] for row in table], refused, errors


def pdf_first_page(pdf: bytes, target: Path) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "report.pdf"
        path.write_bytes(pdf)
        subprocess.run(["pdftoppm", "-png", "-r", "80", "-f", "1", "-l", "1", str(path), f"{folder}/page"], check=True)
        shutil.copy(next(Path(folder).glob("page-*.png")), target)


def real_runs(base: Path, args) -> list:
    doors = start_doors(base, int(args.throttle_mb * 1e6))
    try:
        print("doors: " + ", ".join(f"{k} pid {d.pid} port {d.port}" for k, d in doors.items() if k != "ca"))
        # Short names: they head the report's table columns, and long ones pushed the third off the page.
        stamp = f"rc{int(time.time()) % 100_000}"
        runs = []
        for campaign in make_campaigns(doors, args.files, args.size_mib * MIB, stamp):
            started = time.monotonic()
            runs.append(drive(campaign))
            print(f"run {runs[-1].pk} {campaign.name}: succeeded in {time.monotonic() - started:.1f} s", flush=True)
    finally:
        stop_doors(doors)
    print("doors stopped: " + ", ".join(f"{k} running={d.is_running()}" for k, d in doors.items() if k != "ca"))
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=12)
    parser.add_argument("--size-mib", type=int, default=8)
    parser.add_argument("--throttle-mb", type=float, default=8.0, help="backend C's cap, MB/s")
    parser.add_argument("--runs", default="", help="report on these finished runs (ids, a,b,c) instead of making them")
    args = parser.parse_args()
    if args.files % len(STEPS) or args.files // len(STEPS) < max(STEPS):
        raise SystemExit(f"--files must be a multiple of {len(STEPS)} with at least {max(STEPS)} a step")

    os.environ.setdefault("STORAGEOPS_SITE_NAME", "loopback bench (report_real_comparison.py)")
    harness.setup()
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's loop, after the database work
    from django.conf import settings
    from django.test.utils import setup_test_environment

    setup_test_environment()  # the test Client's host; nothing else of the test runner
    # The page is rendered from the source static files, as in the tests (no collectstatic here).
    plain = {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}
    settings.STORAGES = {**settings.STORAGES, "staticfiles": plain}

    print(f"machine: {harness.machine()}")
    base = Path(tempfile.mkdtemp(prefix="report-real-"))
    try:  # the doors' data, the CA and the report file go, whatever fails
        if args.runs:
            from campaigns.models import Run

            ids = [int(i) for i in args.runs.split(",")]
            runs = sorted(Run.objects.select_related("campaign").filter(pk__in=ids), key=lambda r: ids.index(r.pk))
        else:
            runs = real_runs(base, args)
        equal = check_report(runs, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if not equal:
        sys.exit(1)


def check_report(runs: list, base: Path) -> bool:
    """The report of `runs` against the compare page; prints the figures side by side."""
    from storageops import units

    client = viewer_client()
    query = f"runs={','.join(str(r.pk) for r in runs)}&warmup=0&tail=0&x=concurrency"
    page = client.get(f"/campaigns/compare/?{query}")
    data = client.get(f"/campaigns/compare/data.json?{query}").json()
    started = time.monotonic()
    answer = client.get(f"/campaigns/compare/report.html?{query}")
    html_seconds = time.monotonic() - started
    started = time.monotonic()
    printed = client.get(f"/campaigns/compare/report.pdf?{query}")
    pdf_seconds = time.monotonic() - started
    for what, response in (("page", page), ("report.html", answer), ("report.pdf", printed)):
        if response.status_code != 200:
            raise SystemExit(f"{what}: {response.status_code} {response.content[:300]!r}")

    report = base / "comparison.html"
    report.write_bytes(answer.content)
    drawn, offline_table, refused, js_errors = open_offline(report, SCREENSHOTS / "report-real-comparison.png")
    pdf_first_page(printed.content, SCREENSHOTS / "report-real-comparison-pdf.png")

    # Each run's step curve: the report's chart as Chromium drew it against the page's data.json.
    report_steps = {d["label"]: d["data"] for d in drawn["compare-steps"]}
    print(f"\n{'backend':<18} {'run':>5} {'step':>5} {'achieved':>9} {'report chart':>14} {'dashboard':>14}")
    equal_steps = True
    for run, series in zip(runs, data["runs"], strict=True):
        backend = run.campaign.destinations.get().backend.name
        chart = report_steps.get(series["label"], [])
        equal_steps &= chart == series["steps"]
        for i, point in enumerate(series["steps"]):
            drawn_y = chart[i]["y"] if i < len(chart) else 0
            print(
                f"{backend:<18} {run.pk:>5} {'x' + str(point['target']):>5} {point['x']:>9.2f} "
                f"{units.human_rate(drawn_y):>14} {units.human_rate(point['y']):>14}"
            )
    # The table as Chromium shows it from the file, against the compare page's (and the file's source).
    page_table = cells(page.content.decode(), "compare-table")
    file_table = cells(answer.content.decode(), "compare-table")
    print("\nthe table: '=' the report (file://, Chromium) shows the compare page's row; '!=' it does not")
    for file_row, page_row in zip(offline_table, page_table, strict=False):
        same = file_row == page_row
        print(
            f"  {'=' if same else '!='} {' | '.join(file_row)}"
            + ("" if same else f"\n     page: {' | '.join(page_row)}")
        )
    drew = {name: sum(len(d["data"]) for d in sets) for name, sets in drawn.items()}
    endpoints = [e for r in runs for side in (r.campaign.sources, r.campaign.destinations) for e in side.all()]
    tokens = {e.bearer_token for e in endpoints} - {""}
    leaked = [t for t in tokens if t in answer.content.decode()]
    equal = offline_table == page_table == file_table and equal_steps and all(drew.values())
    equal = equal and not refused and not js_errors and not leaked
    print(f"\nbearer tokens of the endpoints: {len(tokens)}, in the report: {len(leaked)}")
    print(f"charts drawn (points): {drew}; requests refused: {len(refused)}; script errors: {len(js_errors)}")
    print(
        f"HTML report: {len(answer.content) / 1e6:.2f} MB in {html_seconds:.2f} s; "
        f"PDF: {len(printed.content) / 1e6:.2f} MB in {pdf_seconds:.2f} s"
    )
    print(f"equal: {'yes' if equal else 'no'}")
    print(f"screenshots: {SCREENSHOTS}/report-real-comparison.png, report-real-comparison-pdf.png")
    return equal


if __name__ == "__main__":
    main()

"""Screenshots of what a newcomer sees after `make run`, taken from a real `make run`.

    .venv/bin/python scripts/demo_screenshots.py [--out docs/screenshots] [--wait 240]

Starts `manage.py runsite` on a free loopback port with a throw-away var directory, beside its
own PostgreSQL and Redis there (devsite.launch, as `make run`), logs in through Debian's
chromium, waits for the demo run to finish and the collectors to have reported, and writes the
home page, the demo run page and the first door's host page. Stops the site with SIGTERM (what a closed terminal sends).
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import signal
import socket
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from devsite.browser import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from devsite.processes import ManagedProcess  # noqa: E402

PASSWORD = secrets.token_urlsafe(12)  # this throw-away site only


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _healthy(base: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base}/healthz", timeout=5) as response:  # noqa: S310 -- our http://127.0.0.1
            return response.status == 200
    except OSError:
        return False


def _until(what: str, predicate, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"gave up waiting for {what} after {seconds:.0f} s")
        time.sleep(1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    parser.add_argument("--wait", type=float, default=240, help="seconds to wait for the demo run")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="storageops-demo-") as tmp:
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
        env.update(
            STORAGEOPS_VAR_DIR=str(Path(tmp) / "var"),
            STORAGEOPS_ADMIN_PASSWORD=PASSWORD,
            GFAL_PYTHONBIN="/usr/bin/python3",
        )
        argv = [sys.executable, "-m", "devsite.launch", "--", sys.executable, "manage.py", "runsite", "--bind",
                f"127.0.0.1:{port}"]  # fmt: skip
        site = ManagedProcess("runsite", argv, env, Path(tmp), cwd=ROOT).start()
        try:
            _until("the site", lambda: _healthy(base) or site.returncode is not None, 120)
            if site.returncode is not None:
                raise SystemExit(site.log_text()[-3000:])
            args.out.mkdir(parents=True, exist_ok=True)
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.goto(f"{base}/login/")
                page.fill("input[name=username]", "admin")
                page.fill("input[name=password]", PASSWORD)
                page.click("button[type=submit]")
                page.wait_for_url(re.compile(r".*/$"))

                def finished() -> bool:
                    page.goto(f"{base}/campaigns/runs/")
                    return page.locator(".state-succeeded, .state-failed, .state-partial").count() > 0

                _until("the demo run", finished, args.wait)
                page.goto(f"{base}/")
                page.wait_for_timeout(1500)  # the charts' first draw
                page.screenshot(path=str(args.out / "make-run-dashboard.png"), full_page=True)
                page.goto(f"{base}/campaigns/runs/")
                page.click("text=demo-sweep #1")
                page.wait_for_timeout(2500)
                page.screenshot(path=str(args.out / "make-run-demo-run.png"), full_page=True)
                page.goto(f"{base}/hosts/")
                page.click("text=door1")
                page.wait_for_timeout(2500)
                page.screenshot(path=str(args.out / "make-run-host.png"), full_page=True)
                browser.close()
        finally:
            if site.returncode is None:
                os.kill(site.pid, signal.SIGTERM)
                site.proc.wait(timeout=60)
            site.stop()
    for name in ("make-run-dashboard.png", "make-run-demo-run.png", "make-run-host.png"):
        print(args.out / name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

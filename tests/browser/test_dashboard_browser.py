"""The dashboard in a real browser against a live server and a real worker: log in, create a
campaign through the form (one bad value corrected), start it on mock endpoints, watch the
progress bar reach 100 %, compare two runs and read the table. Screenshots of the run page
and the comparison page are written to docs/screenshots/."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest
from playwright.sync_api import Error as PlaywrightError

from campaigns.models import Campaign, Run
from collectors.events import log_event
from tests.support.factories import endpoint

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
PASSWORD = "correct horse battery staple"


def log_in(page, live_server, username: str) -> None:
    page.goto(f"{live_server.url}/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r".*/$"))


def start_and_watch(page, timeout_s: float = 120) -> Run:
    """Press Start on the campaign page and wait on the run page until the bar is full."""
    page.click("text=Start a run")
    page.wait_for_url(re.compile(r".*/campaigns/runs/\d+/$"))
    run = Run.objects.get(pk=int(page.url.rstrip("/").rsplit("/", 1)[1]))
    # The progress block replaces itself every 2 s; the page reloads once when the run ends.
    seen: list[float] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            state = page.evaluate(
                "() => { const b = document.querySelector('#run-progress-bar');"
                " return b ? [Number(b.value), !!document.querySelector('#run-progress[hx-trigger]')] : null; }"
            )
        except PlaywrightError:  # the page is reloading
            state = None
        if state:
            seen.append(state[0])
            if state[0] >= 100 and not state[1]:
                break
        time.sleep(0.5)
    assert seen and seen[-1] == 100.0, seen
    assert seen == sorted(seen), f"the bar went backwards: {seen}"
    # It was watched moving, not only found full.
    assert any(0 < v < 100 for v in seen), seen
    assert page.inner_text("#run-progress .badge") == "Succeeded"
    return run


def test_create_start_watch_and_compare(page, live_server, worker, admin_user):
    src = endpoint("browser-src", "mock://src.test/data/")
    dst = endpoint("browser-dst", "mock://dst.test/data/?time=1", backend_name="ceph-rbd")
    log_in(page, live_server, admin_user.username)

    # -- the form, with a sweep but no step length: refused and explained at the field ---------
    page.goto(f"{live_server.url}/campaigns/new/")
    page.fill("#id_name", "browser sweep")
    page.check(f"input[name=sources][value='{src.pk}']")
    page.check(f"input[name=destinations][value='{dst.pk}']")
    page.fill("#id_file_count", "40")
    page.fill("#id_file_size", "5 MB")
    page.select_option("#id_checksum_mode", "none")
    page.fill("#id_concurrency_steps", "2, 4")
    page.click("text=Save campaign")
    error = page.locator("#row-step_seconds .errorlist")
    assert "needs a step length" in error.inner_text()
    error.scroll_into_view_if_needed()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "campaign-form-error.png"))
    assert not Campaign.objects.filter(name="browser sweep").exists()
    # What was typed is kept; fix the one value.
    assert page.input_value("#id_concurrency_steps") == "2, 4"
    page.fill("#id_step_files", "20")
    page.click("text=Save campaign")
    page.wait_for_url(re.compile(r".*/campaigns/\d+/$"))
    campaign = Campaign.objects.get(name="browser sweep")
    assert campaign.concurrency_steps == [2, 4] and campaign.file_size == 5_000_000

    # -- two runs on mock endpoints, watched to the end ----------------------------------------
    first = start_and_watch(page)
    # The second run with two streams a copy, changed through the edit form: the comparison
    # must single that parameter out.
    page.goto(f"{live_server.url}/campaigns/{campaign.pk}/edit/")
    assert page.input_value("#id_file_size") == "5 MB"
    page.fill("#id_streams", "2")
    page.click("text=Save campaign")
    page.wait_for_url(re.compile(r".*/campaigns/\d+/$"))
    log_event("note", "operator note: streams 1 -> 2", source="operator", backend=dst.backend)
    second = start_and_watch(page)
    # The charts drew from their JSON endpoints.
    page.wait_for_function("() => document.querySelector('[data-chart=throughput]')._chart !== undefined")
    page.wait_for_function("() => document.querySelector('[data-chart=steps]')._chart !== undefined")
    assert page.locator("#step-table tbody tr").count() == 2
    page.wait_for_selector("#transfer-rows table")
    assert page.locator("#transfer-rows tbody tr").count() == 40
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "run-page.png"), full_page=True)
    # At phone width in the dark theme: nothing wider than the screen (tables scroll inside
    # their own box), and the charts redraw.
    page.emulate_media(color_scheme="dark")
    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    page.wait_for_function("() => document.querySelector('[data-chart=throughput]')._chart !== undefined")
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
    background = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(18, 22, 29)", background
    page.screenshot(path=str(SCREENSHOTS / "run-page-phone-dark.png"))
    page.emulate_media(color_scheme="light")
    page.set_viewport_size({"width": 1280, "height": 900})

    # -- the comparison of the two runs --------------------------------------------------------
    page.goto(f"{live_server.url}/campaigns/runs/")
    page.check(f"input[name=runs][value='{first.pk}']")
    page.check(f"input[name=runs][value='{second.pk}']")
    page.click("text=Compare selected")
    page.wait_for_selector("#compare-table")
    headers = page.locator("#compare-table thead th").all_inner_texts()
    assert any(f"#{first.pk}" in h for h in headers) and any(f"#{second.pk}" in h for h in headers)
    throughput = page.locator("#compare-table td[data-figure=throughput]").all_inner_texts()
    success = page.locator("#compare-table td[data-figure=success]").all_inner_texts()
    assert len(throughput) == 2 and all(t.endswith("B/s") for t in throughput), throughput
    assert success == ["100.0 %", "100.0 %"]
    differing = page.locator("#parameters tr.differs th").all_inner_texts()
    assert [d.split()[0] for d in differing] == ["streams"], differing
    first.refresh_from_db()
    assert first.summary["total"]["files_ok"] == 40
    page.wait_for_function("() => document.querySelector('[data-chart=compare-steps]')._chart !== undefined")
    page.screenshot(path=str(SCREENSHOTS / "compare-page.png"), full_page=True)
    assert page.js_errors == []


def test_host_page_draws_real_samples_with_events(page, live_server, admin_user):
    from collectors.models import Host
    from collectors.sampling import HostCollector

    host = Host.objects.create(name="this-machine", address="127.0.0.1", watched_filesystems=["/"])
    collector = HostCollector(host)
    # Rates need two readings: this machine's own /proc, sampled for real.
    for _ in range(3):
        collector.tick()
        time.sleep(1.0)
    log_event("config_change", "xrootd.chksum max 16 -> 48", source="operator", host=host)
    log_in(page, live_server, admin_user.username)
    page.goto(f"{live_server.url}/hosts/{host.pk}/?range=1h")
    for metric in ("cpu.percent", "load1", "net.rx_bps,net.tx_bps", "mem.used"):
        page.wait_for_function(
            f"() => {{ const c = document.querySelector('[data-metric=\"{metric}\"]')._chart;"
            " return c && c.data.datasets.length > 0 && c.data.datasets[0].data.length > 0; }"
        )
    annotations = page.evaluate(
        "() => Object.keys(document.querySelector('[data-metric=\"cpu.percent\"]')._chart"
        ".options.plugins.annotation.annotations).length"
    )
    assert annotations == 1
    # The root filesystem's room, against what statvfs says now; its size dashed at its value.
    page.wait_for_function(
        "() => { const c = document.querySelector('[data-labelled=\"fs.free_bytes\"]')._chart;"
        " return c && c.data.datasets.length === 2; }"
    )
    drawn = page.evaluate(
        "() => document.querySelector('[data-labelled=\"fs.free_bytes\"]')._chart.data.datasets"
        ".map(d => [d.label, d.data[d.data.length - 1].y, !!d.borderDash])"
    )
    st = os.statvfs("/")
    (free_label, free, free_dashed), (size_label, size, size_dashed) = drawn
    assert (free_label, size_label, free_dashed, size_dashed) == ("/", "/ size", False, True), drawn
    assert size == st.f_blocks * st.f_frsize, drawn
    assert abs(free - st.f_bavail * st.f_frsize) < 0.05 * size, drawn
    assert "xrootd.chksum max 16 -&gt; 48" in page.content() or "xrootd.chksum max 16 -> 48" in page.inner_text("main")
    page.screenshot(path=str(SCREENSHOTS / "host-page.png"), full_page=True)
    assert page.js_errors == []

"""The status grid in a real browser, over a site of three backends and four campaigns whose
runs were driven through gfal2's mock plugin (each copy held 1 s, so a run's throughput is the
plugin's, not the machine's): each cell the latest run of a campaign on a backend, coloured by
that backend's own judgement, and a click to the run. The grid is written to
docs/screenshots/status-grid.png."""

from __future__ import annotations

import pytest

from campaigns import runs
from campaigns.models import Endpoint, Run
from campaigns.runs.lifecycle import RunDriver
from collectors.events import log_event
from tests.browser.test_dashboard_browser import SCREENSHOTS, log_in
from tests.support.factories import campaign, endpoint

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
MiB = 1 << 20


def _drive(c, times: int = 1) -> list[Run]:
    driven = []
    for _ in range(times):
        run = runs.create_run(c, trigger="schedule")
        RunDriver(run.pk).drive()
        run.refresh_from_db()
        driven.append(run)
    return driven


def _cell(page, backend: str, campaign_name: str):
    return page.locator(f'td[data-cell="{backend}|{campaign_name}"]')


def test_the_grid_colours_each_backend_by_its_own_judgement_and_opens_the_run(page, live_server, viewer):
    src = endpoint("site-src", "mock://src.test/data/")
    dcache = endpoint("dcache-door", "mock://dcache.test/data/?time=1", backend_name="dcache-disk")
    eos = endpoint("eos-door", "mock://eos.test/data/?time=1", backend_name="eos-disk")
    echo = endpoint("echo-gw", "mock://echo.test/data/?time=1", backend_name="ceph-echo")
    broken = endpoint("echo-gw2", "mock://echo2.test/data/?transfer_errno=5", backend_name="ceph-echo")
    knobs = {"file_count": 8, "file_size": 16 * MiB, "concurrency_steps": [4], "retries": 0}
    nightly = campaign("nightly-writes", [src], [dcache, eos], **knobs)
    reads = campaign("weekly-echo", [src], [echo], **knobs)
    soak = campaign("echo-soak", [src], [echo, broken], **knobs)
    smoke = campaign("eos-smoke", [src], [eos], **knobs)

    _drive(nightly, 4)
    # EOS's door slowed to a third: the config change is logged as an operator would.
    Endpoint.objects.filter(pk=eos.pk).update(url="mock://eos.test/data/?time=3")
    log_event("config_change", "eos fst: io threads 16 -> 4", source="operator", endpoint=eos)
    slowed = _drive(nightly)[0]
    echo_runs = _drive(reads, 4)
    soaked = _drive(soak)[0]
    smoked = _drive(smoke)[0]

    judgement = slowed.summary["judgement"]
    assert judgement["backends"] == {"dcache-disk": "within", "eos-disk": "regressed"}, judgement
    assert [r.summary["judgement"]["status"] for r in echo_runs] == ["no_baseline"] * 3 + ["within"]
    assert soaked.state == "partial" and smoked.summary["judgement"]["status"] == "no_baseline"

    log_in(page, live_server, viewer.username)
    page.goto(f"{live_server.url}/campaigns/status/")
    expected = {
        ("dcache-disk", "nightly-writes"): ("ok", f"#{slowed.pk} within"),
        ("eos-disk", "nightly-writes"): ("bad", f"#{slowed.pk} regressed"),
        ("ceph-echo", "weekly-echo"): ("ok", f"#{echo_runs[-1].pk} within"),
        ("ceph-echo", "echo-soak"): ("warn", f"#{soaked.pk} partial"),
        ("eos-disk", "eos-smoke"): ("unknown", f"#{smoked.pk} no baseline"),
    }
    for (backend, name), (cls, text) in expected.items():
        cell = _cell(page, backend, name)
        assert cell.get_attribute("data-class") == cls, (backend, name, cell.inner_text())
        assert cell.inner_text().startswith(text), (backend, name, cell.inner_text())
    # A campaign that never wrote to a backend leaves its cell empty.
    assert _cell(page, "dcache-disk", "weekly-echo").inner_text().strip() == ""
    page.set_viewport_size({"width": 1280, "height": 420})
    page.screenshot(path=str(SCREENSHOTS / "status-grid.png"), full_page=True)

    _cell(page, "eos-disk", "nightly-writes").locator("a").click()
    page.wait_for_url(f"**/campaigns/runs/{slowed.pk}/")
    figures = page.locator("#judgement tr[data-figure]")
    status = {f.get_attribute("data-figure"): f.get_attribute("data-status") for f in figures.all()}
    assert status["backend_copy_rate:eos-disk"] == "regressed", status
    assert status["backend_copy_rate:dcache-disk"] == "within", status
    assert "config change on eos-door" in page.locator("#judgement").inner_text()
    assert page.js_errors == []

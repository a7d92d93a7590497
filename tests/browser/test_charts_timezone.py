"""Every time a chart shows is in the site's zone (settings.TIME_ZONE), 24-hour, whatever the
browser's own zone: the site here is in Zurich, the browser in New York. Axis ticks, tooltips and
the page say the same zone; events close in time get labels whose boxes do not overlap, on the
page and in the report printed to PDF. Writes docs/screenshots/run-chart-time-zone.png."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from campaigns.models import Run
from collectors.events import log_event
from collectors.models import Host, MetricSample
from storageops import roles
from tests.browser.test_dashboard_browser import SCREENSHOTS, log_in
from tests.support.api import api
from tests.support.factories import mock_campaign
from tests.support.runs import drive

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SITE_ZONE = "Europe/Zurich"
BROWSER_ZONE = "America/New_York"
ZURICH = ZoneInfo(SITE_ZONE)
# A winter day: Zurich is UTC+1, New York UTC-5.
NOON = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)
TWENTY_FOUR_HOUR = re.compile(r"^(\d\d-\d\d )?([01]\d|2[0-3]):[0-5]\d(:[0-5]\d)?$")


@pytest.fixture
def in_zurich(settings):
    settings.TIME_ZONE = SITE_ZONE


@pytest.fixture
def new_york_page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900}, timezone_id=BROWSER_ZONE)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.js_errors = errors
    try:
        yield page
    finally:
        context.close()


def _chart(name: str) -> str:
    return f"document.querySelector('canvas[data-chart=\"{name}\"]')._chart"


def _wait_drawn(page, name: str) -> None:
    page.wait_for_function(
        f"() => {{ const c = {_chart(name)};"
        " return c && c.data.datasets.some(d => d.data.length) && c.scales.x.ticks.length; }",
        timeout=15_000,
    )


def _ticks(page, name: str) -> list[tuple[float, str]]:
    return page.evaluate(f"() => {_chart(name)}.scales.x.ticks.map(t => [t.value, t.label])")


def _in_zurich(ms: float, pattern: str) -> str:
    return datetime.fromtimestamp(ms / 1000, ZURICH).strftime(pattern)


def _assert_ticks_in_zurich(ticks: list[tuple[float, str]]) -> None:
    """Each tick is labelled 24-hour with the Zurich wall clock at its own place on the axis."""
    assert len(ticks) >= 3, ticks
    for value, label in ticks:
        assert TWENTY_FOUR_HOUR.match(label), label
        pattern = ("%m-%d " if len(label) > 8 else "") + ("%H:%M:%S" if label.count(":") == 2 else "%H:%M")
        assert label == _in_zurich(value, pattern), (value, label)


def _mouse_on(page, name: str, x: float, y: float) -> None:
    """Move the mouse to (x, y) of the chart's canvas."""
    canvas = page.locator(f'canvas[data-chart="{name}"]')
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    page.mouse.move(box["x"] + x, box["y"] + y)


def _tooltip_title(page, name: str, dataset: int, index: int) -> str:
    """Move the mouse onto a point of the chart and read the title of the tooltip it opens."""
    x, y = page.evaluate(
        f"() => {{ const p = {_chart(name)}.getDatasetMeta({dataset}).data[{index}]; return [p.x, p.y]; }}"
    )
    _mouse_on(page, name, x, y)
    page.wait_for_function(f"() => {_chart(name)}.tooltip.opacity > 0 && {_chart(name)}.tooltip.title.length")
    return page.evaluate(f"() => {_chart(name)}.tooltip.title[0]")


def _events(name: str) -> str:
    """The chart's event lines, as the annotation plugin holds them (each with its label)."""
    return (
        f"Chart.registry.getPlugin('annotation').getAnnotations({_chart(name)})"
        ".filter(a => a.options.id && a.options.id.startsWith('event'))"
    )


def _label_boxes(page, name: str) -> list[dict]:
    """The boxes of the event labels drawn on a chart, as the annotation plugin placed them."""
    return page.evaluate(
        f"""() => {{ const area = {_chart(name)}.chartArea;
            return {_events(name)}.filter(a => a.label.options.display)
              .map(a => ({{text: a.label.options.content, x: a.label.x, y: a.label.y, x2: a.label.x2, y2: a.label.y2,
                          top: area.top, bottom: area.bottom, left: area.left, right: area.right}})); }}"""
    )


def _wait_labels_shown(page, name: str, count: int) -> None:
    page.wait_for_function(f"() => {_events(name)}.filter(a => a.label.options.display).length === {count}")


def _assert_apart(boxes: list[dict]) -> None:
    for i, a in enumerate(boxes):
        assert a["left"] <= a["x"] and a["x2"] <= a["right"] and a["top"] <= a["y"] and a["y2"] <= a["bottom"], a
        for b in boxes[i + 1 :]:
            apart = a["x2"] <= b["x"] or b["x2"] <= a["x"] or a["y2"] <= b["y"] or b["y2"] <= a["y"]
            assert apart, (a, b)


def _host_with_samples(name: str, start: datetime, step: timedelta, count: int) -> Host:
    host = Host.objects.create(name=name, sample_interval=int(step.total_seconds()))
    MetricSample.objects.bulk_create(
        MetricSample(host=host, metric="cpu.percent", time=start + i * step, value=20.0 + (i % 7) * 5)
        for i in range(count)
    )
    return host


def _window(start: datetime, end: datetime) -> str:
    return f"from={start.isoformat().replace('+00:00', 'Z')}&to={end.isoformat().replace('+00:00', 'Z')}"


def test_the_host_charts_speak_the_sites_zone(new_york_page, live_server, viewer, in_zurich):
    page = new_york_page
    host = _host_with_samples("tz-door", NOON + timedelta(minutes=50), timedelta(minutes=1), 31)
    # Two events a minute apart: their labels would fall on each other.
    log_event("config_change", "xrd.sched maxt 512", source="operator", host=host, time=NOON + timedelta(minutes=65))
    log_event("service_restart", "xrootd restarted", source="collector", host=host, time=NOON + timedelta(minutes=66))
    log_in(page, live_server, viewer.username)

    page.goto(f"{live_server.url}/")
    assert f"Times in {SITE_ZONE}" in page.inner_text(".page-header")

    start, end = NOON + timedelta(hours=1), NOON + timedelta(hours=1, minutes=10)
    page.goto(f"{live_server.url}/hosts/{host.pk}/?{_window(start, end)}")
    _wait_drawn(page, "cpu")
    # The page and the chart name the zone the times are in; the shaded step is Zurich's 14:00.
    assert f"2026-01-15 14:00:00 – 14:10:00 {SITE_ZONE} (shaded)" in page.inner_text("[data-window]")
    assert page.evaluate(f"() => {_chart('cpu')}.options.scales.x.title.text") == f"time ({SITE_ZONE})"
    _assert_ticks_in_zurich(_ticks(page, "cpu"))
    # Round times of Zurich's clock: not UTC's 12 and 13 o'clock, nor New York's 7 and 8.
    assert [label for _, label in _ticks(page, "cpu")] == ["13:55", "14:00", "14:05", "14:10", "14:15"]

    # The sample of 13:05 UTC says 14:05 in its tooltip.
    points = page.evaluate(f"() => {_chart('cpu')}.data.datasets[0].data.map(p => p.x)")
    index = min(range(len(points)), key=lambda i: abs(points[i] - (NOON + timedelta(minutes=65)).timestamp() * 1000))
    title = _tooltip_title(page, "cpu", 0, index)
    assert title == _in_zurich(points[index], "%Y-%m-%d %H:%M:%S") and title.startswith("2026-01-15 14:05"), title

    boxes = _label_boxes(page, "cpu")
    assert sorted(b["text"] for b in boxes) == ["Config change", "Service restart"]
    # A minute apart is closer than a name is wide: one is lifted above the other.
    assert boxes[0]["y"] != boxes[1]["y"]
    _assert_apart(boxes)
    assert page.js_errors == []


def test_crowded_event_labels_show_on_hover(new_york_page, live_server, viewer, in_zurich):
    page = new_york_page
    host = _host_with_samples("tz-busy", NOON + timedelta(minutes=50), timedelta(minutes=1), 31)
    # Eight restarts 8 s apart: more names than rows the plot has room for.
    for i in range(8):
        log_event("service_restart", f"restart {i}", host=host, time=NOON + timedelta(minutes=65, seconds=8 * i))
    log_in(page, live_server, viewer.username)
    start, end = NOON + timedelta(hours=1), NOON + timedelta(hours=1, minutes=10)
    page.goto(f"{live_server.url}/hosts/{host.pk}/?{_window(start, end)}")
    _wait_drawn(page, "cpu")
    shown = _label_boxes(page, "cpu")
    assert 2 <= len(shown) < 8
    _assert_apart(shown)

    # A hidden name shows while the mouse is on its line, above the rows of the others.
    x, y = page.evaluate(
        f"""() => {{ const chart = {_chart("cpu")}, area = chart.chartArea;
            const line = {_events("cpu")}.find(a => !a.label.options.display);
            return [chart.scales.x.getPixelForValue(line.options.xMin), (area.top + area.bottom) / 2]; }}"""
    )
    _mouse_on(page, "cpu", x, y)
    _wait_labels_shown(page, "cpu", len(shown) + 1)
    _assert_apart(_label_boxes(page, "cpu"))
    page.mouse.move(0, 0)
    _wait_labels_shown(page, "cpu", len(shown))
    assert page.js_errors == []


def test_days_are_ticked_at_the_sites_midnights(new_york_page, live_server, viewer, in_zurich):
    page = new_york_page
    host = _host_with_samples("tz-days", NOON - timedelta(days=10), timedelta(hours=1), 24 * 20)
    log_in(page, live_server, viewer.username)
    page.goto(f"{live_server.url}/hosts/{host.pk}/?{_window(NOON - timedelta(days=3), NOON + timedelta(days=4))}")
    _wait_drawn(page, "cpu")
    ticks = _ticks(page, "cpu")
    assert len(ticks) >= 3, ticks
    for value, label in ticks:
        # New York's midnights would be Zurich's 06:00: each day's tick is at Zurich's 00:00.
        assert _in_zurich(value, "%H:%M:%S") == "00:00:00" and label == _in_zurich(value, "%m-%d"), (value, label)
    assert page.js_errors == []


def _run_with_close_events() -> Run:
    """A run of a few seconds whose door had a config change and a restart 0.3 s apart, in
    its window with its own start and end: four labels on a short axis."""
    campaign = mock_campaign("tz-run", dst_query="time=1", file_count=12, concurrency_steps=[2, 4], step_files=6)
    door = campaign.destinations.get()
    host = Host.objects.create(name="door2", sample_interval=1)
    door.hosts.add(host)
    run = drive(campaign)
    middle = run.started_at + (run.finished_at - run.started_at) / 2
    log_event("config_change", "xrd.sched maxt raised", source="collector", host=host, time=middle)
    log_event(
        "service_restart", "xrootd restarted", source="collector", host=host, time=middle + timedelta(milliseconds=300)
    )
    return Run.objects.get(pk=run.pk)


def test_the_run_page_charts_and_its_report(new_york_page, browser, live_server, viewer, in_zurich, tmp_path):
    run = _run_with_close_events()
    page = new_york_page
    log_in(page, live_server, viewer.username)
    page.goto(f"{live_server.url}{run.get_absolute_url()}")
    _wait_drawn(page, "throughput")
    _assert_ticks_in_zurich(_ticks(page, "throughput"))
    assert f"time ({SITE_ZONE})" == page.evaluate(f"() => {_chart('throughput')}.options.scales.x.title.text")
    title = _tooltip_title(page, "throughput", 0, 0)
    first = page.evaluate(f"() => {_chart('throughput')}.data.datasets[0].data[0].x")
    assert title == _in_zurich(first, "%Y-%m-%d %H:%M:%S"), title
    boxes = {b["text"]: b for b in _label_boxes(page, "throughput")}
    assert boxes["Config change · door2"]["y"] != boxes["Service restart · door2"]["y"]
    _assert_apart(list(boxes.values()))
    assert page.inner_text("[data-time-zone-name]") == SITE_ZONE
    page.mouse.move(0, 0)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.locator('figure:has(canvas[data-chart="throughput"])').screenshot(
        path=str(SCREENSHOTS / "run-chart-time-zone.png")
    )
    assert page.js_errors == []

    # The report, laid out in the window its PDF is printed from (campaigns.reports.pdf), the same.
    answer = api(viewer, roles.VIEWER).get(f"/api/v1/runs/{run.pk}/report.html")
    report = tmp_path / "report.html"
    report.write_bytes(answer.content)
    printed = browser.new_context(viewport={"width": 1047, "height": 740}, timezone_id=BROWSER_ZONE).new_page()
    printed.goto(report.as_uri())
    _wait_drawn(printed, "throughput")
    assert f"Time ({SITE_ZONE})" in printed.inner_text("#event-table thead")
    _assert_ticks_in_zurich(_ticks(printed, "throughput"))
    for name in ("throughput", "active"):
        _assert_apart(_label_boxes(printed, name))
    printed.context.close()

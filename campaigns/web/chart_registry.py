"""The charts of the campaigns pages, each declared once: its name, caption, how it is drawn,
the JSON documents it reads and the options its drawer needs.

A page's view binds its charts (fills in the page's own words: a sweep's axis, the URLs) and
the template renders one canvas per chart through `charts/figures.html`:
`data-chart` (its name), `data-draw` (which drawer of static/js/charts.js draws it),
`data-sources` (its documents by name, with their URLs) and one `data-*` attribute per option.
charts.js finds every canvas by these attributes, fetches each document a page names once, and
hands each canvas the documents it named: nothing is matched by position, so a chart is added
or removed here alone. The run page's documents are served by `run_views.run_chart` from
RUN_DOCUMENTS, the one list of them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.safestring import mark_safe

from campaigns.models import Run
from campaigns.results import charts, readers
from campaigns.spec import RunSpec
from storageops.charts import Chart, bind

__all__ = ["Chart", "bind"]


# -- the run page (live or finished) --------------------------------------------------------
RUN_DOCUMENTS: dict[str, Callable[[Run], dict]] = {
    "timeline": readers.timeline,
    "steps": lambda run: charts.steps_chart(readers.steps(run), RunSpec.of(run).swept_axes),
    "errors": lambda run: {"errors": charts.error_mix(run)},
    "scatter": charts.scatter,
    "hosts": charts.hosts,
    "events": lambda run: {"events": charts.events(run)},
}


def run_document(run: Run, name: str) -> dict:
    """One of the run page's documents as served (and embedded in a report): `live` tells the
    page whether to ask again."""
    return {"run": run.pk, "live": run.is_live, **RUN_DOCUMENTS[name](run)}


_NO_DOOR_HOST = (
    "No door of this run is registered as a host: register the doors and start their collectors to see this."
)


def _door_metric(name: str, title: str, note: str, label: str, metric: str, unit: str) -> Chart:
    return Chart(
        name, title, note, label, draw="door-metric", reads=("hosts", "events"),
        options=(("metric", metric), ("unit", unit), ("no-host", _NO_DOOR_HOST)),
    )  # fmt: skip


def _door_labelled(name: str, title: str, note: str, label: str, options: tuple[tuple[str, str], ...]) -> Chart:
    return Chart(
        name, title, note, label, draw="labelled", reads=("hosts", "events"),
        options=(*options, ("no-host", _NO_DOOR_HOST)),
    )  # fmt: skip


RUN_CHARTS = (
    Chart("throughput", "Throughput over time", "per door and in total, with a rolling mean; events drawn as lines",
          "Throughput in bytes per second over time, per door and total", draw="timeline",
          reads=("timeline", "events"), wide=True),
    Chart("active", "Copies in flight", "mean per time bucket, failures as bars", "Active transfers over time",
          draw="in-flight", reads=("timeline", "events")),
    Chart("steps", "Throughput vs concurrency", "one point per step{per_setting}", "Throughput per concurrency step",
          draw="steps", reads=("steps",)),
    Chart("steps-by-axis", "Throughput vs {axis_label}", "the same steps, one line per concurrency",
          "Throughput per {axis_label}, one line per concurrency", draw="steps-by-axis", reads=("steps",),
          options=(("axis", "{axis}"), ("axis-label", "{axis_label}")), figure_id="sweep-matrix", needs="axis"),
    Chart("scatter", "Duration vs file size", "a sample of successful copies",
          "Duration in seconds against file size in bytes", draw="scatter", reads=("scatter",)),
    Chart("errors", "Errors", "failures by category; pick one for its raw messages", "Failures per error category",
          draw="errors", reads=("errors",), short=True, extra="campaigns/partials/error_categories.html"),
    _door_metric("door-cpu", "Door CPU", "busy % of each involved host", "CPU percent of the doors over time",
                 "cpu.percent", "%"),
    _door_metric("door-load", "Door load", "1-minute load average", "Load average of the doors over time", "load1", ""),
    _door_metric("door-network", "Door network", "received and sent, all interfaces but loopback",
                 "Network bytes per second of the doors over time", "net", "B/s"),
    _door_labelled("daemon-cpu", "Daemon CPU",
                   "each door's watched daemon (100 % = one core), dashed: the cores or quota it may use",
                   "Each door daemon's CPU over time against the CPU it may use",
                   (("labelled", "proc.cpu_percent"), ("limit", "proc.cpus_allowed"), ("unit", "%"),
                    ("title", "daemon CPU (% of one core)"))),
    _door_labelled("door-disks", "Door disks", "busy % of each device", "Busy percent of each door disk over time",
                   (("labelled", "disk.busy_percent"), ("unit", "%"), ("title", "disk busy (%)"))),
    _door_labelled("door-disk-throughput", "Door disk throughput", "read and written, per device",
                   "Bytes read and written per second of each door disk",
                   (("labelled", "disk.read_bps,disk.write_bps"), ("unit", "B/s"), ("title", "disk (bytes/s)"))),
    _door_labelled("door-logs", "Door log patterns", "matching lines in the doors' watched logs, per chart bucket",
                   "Log lines matching each pattern in the door logs over time",
                   (("labelled", "log.matches"), ("unit", ""), ("title", "matching lines"))),
)  # fmt: skip


def run_page(run_pk: int, swept: list[tuple[str, str]]) -> list[Chart]:
    """The run page's charts; `swept` is the sweep's (axis, label) pairs beyond concurrency."""
    labels = " and ".join(label for _, label in swept)
    values = {
        "per_setting": f", one line per {labels}" if swept else "",
        "axis": swept[0][0] if swept else "",
        "axis_label": swept[0][1] if swept else "",
    }
    urls = {name: reverse("campaigns:run_chart", args=[run_pk, name]) for name in RUN_DOCUMENTS}
    return bind(RUN_CHARTS, values, urls)


@functools.lru_cache(maxsize=1024)
def run_page_html(run_pk: int, swept: tuple[tuple[str, str], ...]) -> str:
    """The run page's chart figures, rendered: they depend on the run's id and its swept axes
    alone (what they draw, charts.js fetches), so every view of a run, by anyone, live or
    finished, shows the same markup; rendering it (a dozen figures) was a millisecond a page."""
    # error_categories.html, in the errors figure, asks for run.pk only.
    context = {"charts": run_page(run_pk, list(swept)), "run": {"pk": run_pk}}
    return mark_safe(render_to_string("charts/figures.html", context))  # noqa: S308 -- our template's output


# -- the comparison page --------------------------------------------------------------------
COMPARE_CHARTS = (
    Chart("compare-steps", "Throughput vs {x_label}", "one point per step; {lines}; dashed: disturbed run{trimmed}",
          "Throughput per step against {x_label}", draw="compare-steps", reads=("compare",)),
    Chart("compare-time", "Throughput over time", "aligned on each run's start{trimmed_time}",
          "Total throughput over time since each run's start", draw="compare-time", reads=("compare",)),
)  # fmt: skip


def compare_page(query: str, x_label: str, trimmed: bool) -> list[Chart]:
    """The comparison's charts, drawn from compare/data.json asked with the page's own query."""
    values = {
        "x_label": x_label,
        "lines": "one line per run"
        if x_label == "concurrency"
        else "a line per run and setting where the runs sweep it, else a line per concurrency across the runs",
        "trimmed": "; trimmed as the table" if trimmed else "",
        "trimmed_time": "; trimmed as the table: the periods left out are gaps" if trimmed else "",
    }
    return bind(COMPARE_CHARTS, values, {"compare": f"{reverse('campaigns:compare_data')}?{query}"})


# -- the campaign page ----------------------------------------------------------------------
HISTORY_CHARTS = (
    Chart("history", "History",
          "each ended run (click a point for its run; a triangle is a run not counted in later baselines: partial, "
          "disturbed, a retry, or left out by an operator), the band it was judged against, and the config changes, "
          "restarts and deploys of its doors",
          "Each run's figure over time with the band it was judged against and the change-log events",
          draw="history", reads=("history",), wide=True, caption_extra="campaigns/partials/history_figure.html"),
)  # fmt: skip


def campaign_page(campaign_id: int) -> list[Chart]:
    """The campaign's history chart; the figure it shows is the page's `figure` choice."""
    return bind(HISTORY_CHARTS, {}, {"history": reverse("campaigns:campaign_history", args=[campaign_id])})

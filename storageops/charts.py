"""A chart of a page, declared once: its name, caption, how it is drawn, the JSON documents it
reads and the options its drawer needs; bound to one page's words and URLs, and rendered by
`templates/charts/figures.html` as one canvas that static/js/charts.js draws.

Every app's pages declare their charts with this (campaigns.web.chart_registry, collectors'
host page), so a page's canvases are never written by hand and every drawer they name is one
charts.js has.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class Chart:
    name: str  # data-chart: the canvas's name, unique on its page
    title: str
    note: str  # the caption's small print
    label: str  # aria-label: what the chart shows, said to a screen reader
    draw: str  # data-draw: the drawer of static/js/charts.js that draws it
    reads: tuple[str, ...]  # the page's JSON documents it is drawn from
    options: tuple[tuple[str, str], ...] = ()  # more data-* attributes for its drawer
    wide: bool = False
    short: bool = False
    figure_id: str = ""
    # A value of the page without which the chart is left out (the swept axis of a sweep).
    needs: str = ""
    # Templates rendered in the figure: after the caption's text, and after the canvas.
    caption_extra: str = ""
    extra: str = ""
    sources: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    @property
    def sources_json(self) -> str:
        return json.dumps(dict(self.sources))

    def bound(self, values: Mapping[str, str], urls: Mapping[str, str]) -> Chart:
        """This chart on one page: its words filled in with the page's values, its documents' URLs."""
        return replace(
            self,
            title=self.title.format_map(values),
            note=self.note.format_map(values),
            label=self.label.format_map(values),
            options=tuple((key, value.format_map(values)) for key, value in self.options),
            sources=tuple((name, urls[name]) for name in self.reads),
        )


def bind(declared: tuple[Chart, ...], values: Mapping[str, str], urls: Mapping[str, str]) -> list[Chart]:
    """The charts a page shows, bound; a chart whose `needs` value is empty is left out."""
    return [chart.bound(values, urls) for chart in declared if not chart.needs or values.get(chart.needs)]

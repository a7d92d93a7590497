"""The status grid page (campaigns.results.status_grid builds it)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from campaigns.results import status_grid


def status_page(request: HttpRequest) -> HttpResponse:
    data = status_grid.grid()
    rows = [
        (backend, [(campaign, cell, status_grid.cell_class(cell)) for campaign in data["campaigns"]
                   for cell in [data["cells"].get((backend, campaign))]])
        for backend in data["backends"]
    ]  # fmt: skip
    return render(request, "campaigns/status_grid.html", {"campaigns": data["campaigns"], "rows": rows})

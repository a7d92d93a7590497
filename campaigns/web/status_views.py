"""The status grid page (campaigns.results.status_grid builds it)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from campaigns.results import status_grid


def status_page(request: HttpRequest) -> HttpResponse:
    return render(request, "campaigns/status_grid.html", status_grid.grid())

"""One zone everywhere: the pages show times in settings.TIME_ZONE, 24-hour, and name that zone
(the charts, drawn in the browser, are checked in tests/browser/test_charts_timezone.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.template import Context, Template

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
# Characters of Django's date formats that make a 12-hour clock or name a zone by its abbreviation.
TWELVE_HOUR_OR_ABBREVIATED = set("ghaAPT")
FORMATS = re.compile(r"""\|(?:date|time):["']([^"']*)["']|\{%\s*now\s+["']([^"']*)["']""")
# |time without a format takes TIME_FORMAT, whose English default is "P" ("2:34 p.m.").
BARE_TIME = re.compile(r"\|time(?![:a-z_])")


def _render(text: str, **context) -> str:
    return Template("{% load storageops %}" + text).render(Context(context))


@pytest.fixture
def in_zurich(settings):
    settings.TIME_ZONE = "Europe/Zurich"


def test_a_documents_iso_time_is_shown_in_the_sites_zone(in_zurich):
    shown = '{{ at|iso_time|date:"Y-m-d H:i:s" }} {% time_zone %}'
    # 13:05 UTC on a winter day is 14:05 in Zurich, with or without the offset written.
    assert _render(shown, at="2026-01-15T13:05:00+00:00") == "2026-01-15 14:05:00 Europe/Zurich"
    assert _render(shown, at="2026-01-15T13:05:00") == "2026-01-15 14:05:00 Europe/Zurich"
    assert _render(shown, at="2026-07-15T13:05:00Z") == "2026-07-15 15:05:00 Europe/Zurich"
    assert _render(shown, at="") == " Europe/Zurich"
    assert _render(shown, at="not a time") == " Europe/Zurich"


def test_the_zone_is_utc_unless_configured():
    assert _render("{% time_zone %}") == "UTC"


def test_no_template_shows_a_12_hour_clock_or_a_zone_abbreviation():
    found = []
    for path in TEMPLATES.rglob("*.html"):
        text, name = path.read_text(encoding="utf-8"), path.relative_to(TEMPLATES)
        for match in FORMATS.finditer(text):
            pattern = match.group(1) if match.group(1) is not None else match.group(2)
            # A backslash escapes the next character: it is printed, not a format.
            if set(re.sub(r"\\.", "", pattern)) & TWELVE_HOUR_OR_ABBREVIATED:
                found.append(f"{name}: {match.group(0)}")
        found += [f"{name}: |time" for _ in BARE_TIME.finditer(text)]
    assert found == []


@pytest.mark.django_db
def test_the_tokens_page_says_24_hour_times(client, viewer, in_zurich):
    client.force_login(viewer)
    html = client.post("/tokens/", {"name": "tz", "role": "viewer"}).content.decode()
    assert re.search(r"<td>\d{4}-\d\d-\d\d ([01]\d|2[0-3]):[0-5]\d</td>", html), html
    assert "a.m." not in html and "p.m." not in html

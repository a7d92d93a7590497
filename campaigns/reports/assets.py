"""The dashboard's own static files, inlined into a report so it needs no server and no network."""

from __future__ import annotations

from functools import cache

from django.contrib.staticfiles import finders

# The order base.html loads them in: the adapter and the annotation plugin register on Chart.
SCRIPTS = (
    "js/storageops.js",
    "vendor/chart-4.6.1.umd.min.js",
    "vendor/chartjs-adapter-date-fns-3.0.0.bundle.min.js",
    "vendor/chartjs-plugin-annotation-3.1.0.min.js",
    "js/charts.js",
)
STYLESHEETS = ("css/storageops.css",)


@cache
def _read(name: str) -> str:
    path = finders.find(name)
    if path is None:
        raise FileNotFoundError(f"static file {name} not found: run collectstatic or check STATICFILES_DIRS")
    with open(path, encoding="utf-8") as f:
        return f.read()


def scripts() -> list[str]:
    # A script's text ends at the first "</script": none of ours holds one, but a later copy
    # might, so it is escaped where it could only be inside a string or a regular expression.
    return [_read(name).replace("</script", "<\\/script") for name in SCRIPTS]


def stylesheets() -> list[str]:
    return [_read(name).replace("</style", "<\\/style") for name in STYLESHEETS]

"""The API's routes, filled by the apps: storageops owns the router and imports no app.

Each app registers its viewsets (and the odd plain view) in its AppConfig.ready(), by dotted
path, so that nothing of the API is imported before a URL is resolved; storageops.api.urls
builds the one router under /api/v1/ from them, in registration order (INSTALLED_APPS').
"""

from __future__ import annotations

from dataclasses import dataclass

from django.utils.module_loading import import_string


@dataclass(frozen=True)
class ViewRoute:
    route: str
    view: str
    name: str


_viewsets: dict[str, str] = {}
_views: list[ViewRoute] = []


def register_viewset(prefix: str, dotted_path: str) -> None:
    """/api/v1/<prefix>/ served by the viewset at `dotted_path`."""
    _viewsets[prefix] = dotted_path


def register_view(route: str, dotted_path: str, name: str) -> None:
    """/api/v1/<route> served by the class-based view at `dotted_path`."""
    _views.append(ViewRoute(route, dotted_path, name))


def viewsets() -> list[tuple[str, type]]:
    return [(prefix, import_string(path)) for prefix, path in _viewsets.items()]


def views() -> list[tuple[str, type, str]]:
    return [(r.route, import_string(r.view), r.name) for r in _views]

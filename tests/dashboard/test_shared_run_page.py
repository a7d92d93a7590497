"""The run page rendered once for every viewer of one role (issue 46: three hundred people open a
data challenge's run page within a second), each given their own CSRF token and name, with what
their role lets them do; a page with messages of its own rendered for itself."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.test.signals import template_rendered

from campaigns import runs
from campaigns.models import Run
from campaigns.web import live_snapshot
from campaigns.web.run_views import RUN_PAGE_PERMISSIONS, RunDetailView
from storageops import roles, shared_pages
from tests.conftest import _user
from tests.support.factories import mock_campaign

pytestmark = pytest.mark.django_db(transaction=True)
SECOND = 1_900_000_000.0


@pytest.fixture
def live_run(monkeypatch) -> Run:
    run = runs.create_run(mock_campaign("shared-page"), trigger="command")
    Run.objects.filter(pk=run.pk).update(state="running", files_done=3, planned_files=10)
    live_snapshot.forget_process_memory()
    monkeypatch.setattr(live_snapshot.time, "time", lambda: SECOND)  # every ask in one second
    return run


@pytest.fixture
def renderings(monkeypatch) -> list[int]:
    counted: list[int] = []
    original = RunDetailView._shared_rendering

    def counting(self, request):
        counted.append(request.user.pk)
        return original(self, request)

    monkeypatch.setattr(RunDetailView, "_shared_rendering", counting)
    return counted


def _page(user: User, path: str) -> tuple[Client, str]:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    response = client.get(path)
    assert response.status_code == 200
    return client, response.content.decode()


def _token(html: str) -> str:
    tokens = set(re.findall(r'name="csrfmiddlewaretoken" value="([^"]+)"', html))
    tokens |= set(re.findall(r'<meta name="csrf-token" content="([^"]+)"', html))
    assert len(tokens) == 1, tokens
    return tokens.pop()


def test_viewers_of_one_role_share_a_rendering_each_with_their_own_token_and_name(live_run, renderings, viewer):
    other = _user("victor-<viewer>", roles.VIEWER)
    _, first = _page(viewer, live_run.get_absolute_url())
    _, second = _page(other, live_run.get_absolute_url())
    assert len(renderings) == 1, renderings
    assert shared_pages.CSRF_PLACEHOLDER not in first + second
    assert shared_pages.USER_PLACEHOLDER not in first + second
    assert '<span title="Signed in">vera-viewer</span>' in first
    assert '<span title="Signed in">victor-&lt;viewer&gt;</span>' in second  # escaped as the template would
    assert _token(first) != _token(second)

    # Apart from the token and the name, the same page.
    def plain(html: str, name: str) -> str:
        return html.replace(_token(html), "TOKEN").replace(name, "NAME")

    assert plain(first, "vera-viewer") == plain(second, "victor-&lt;viewer&gt;")


def test_each_role_sees_its_own_forms_and_the_token_in_them_is_accepted(live_run, renderings, viewer, operator):
    _, seen_by_viewer = _page(viewer, live_run.get_absolute_url())
    client, seen_by_operator = _page(operator, live_run.get_absolute_url())
    assert len(renderings) == 2  # one per role
    assert "Cancel run" not in seen_by_viewer
    assert "Cancel run" in seen_by_operator
    # The operator's form carries the operator's own token: the cancel it posts is accepted.
    token = _token(seen_by_operator)
    response = client.post(f"/campaigns/runs/{live_run.pk}/cancel/", {"csrfmiddlewaretoken": token})
    assert response.status_code == 302, response.content[:500]
    live_run.refresh_from_db()
    assert live_run.state == "cancelling" and live_run.cancel_requested_at is not None, live_run.state


def test_a_page_with_messages_of_its_own_is_rendered_for_itself(live_run, renderings, operator, viewer):
    _page(viewer, live_run.get_absolute_url())
    client = Client()
    client.force_login(operator)
    response = client.post(f"/campaigns/runs/{live_run.pk}/cancel/", follow=True)
    page = response.content.decode()
    assert f"Cancel requested for run #{live_run.pk}" in page
    assert len(renderings) == 1  # the viewer's; the operator's page with its message was its own
    # Shown once: the next ask is a shared page again, without it.
    again = client.get(live_run.get_absolute_url()).content.decode()
    assert "Cancel requested for run" not in again


def test_a_changed_run_is_rendered_anew_within_the_second(live_run, renderings, viewer):
    _page(viewer, live_run.get_absolute_url())
    Run.objects.filter(pk=live_run.pk).update(files_done=4)
    _page(viewer, live_run.get_absolute_url())
    assert len(renderings) == 2


def test_a_missing_run_is_404_for_every_viewer(viewer, renderings, monkeypatch):
    monkeypatch.setattr(live_snapshot.time, "time", lambda: SECOND)
    client = Client()
    client.force_login(viewer)
    assert client.get("/campaigns/runs/999999999/").status_code == 404
    assert renderings == []


def test_every_permission_the_pages_templates_test_is_in_its_role_key(live_run, admin_user):
    """A permission tested in a template the page renders but left out of RUN_PAGE_PERMISSIONS
    would show one role's forms to another; the user object is a stand-in with three fields."""
    rendered: set[str] = set()

    def seen(sender, template, context, **kwargs):
        if template.origin and template.origin.name:
            rendered.add(template.origin.name)

    template_rendered.connect(seen)
    try:
        live_snapshot.forget_process_memory()
        _page(admin_user, live_run.get_absolute_url())
    finally:
        template_rendered.disconnect(seen)
    sources = {name: Path(name).read_text() for name in rendered if name.endswith(".html")}
    assert any(name.endswith("run_detail.html") for name in sources), sorted(sources)
    tested = {f"{app}.{code}" for text in sources.values() for app, code in re.findall(r"perms\.(\w+)\.(\w+)", text)}
    assert tested and tested <= set(RUN_PAGE_PERMISSIONS), tested
    used = {attr for text in sources.values() for attr in re.findall(r"\buser\.(\w+)", text)}
    assert used <= {"is_authenticated", "is_staff", "get_username"}, used

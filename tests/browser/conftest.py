"""A real browser: Debian's chromium driven by Playwright, headless, with no network of its own."""

from __future__ import annotations

import os

import pytest

from devsite.browser import CHROMIUM, CHROMIUM_ARGS


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: scripts/bootstrap.sh test installs Debian's chromium")
    # Playwright's sync API runs its own event loop; Django refuses database calls from a
    # thread with a running loop unless told this is deliberate.
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.js_errors = errors
    try:
        yield page
    finally:
        context.close()

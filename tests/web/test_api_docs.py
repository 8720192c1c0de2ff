"""``/docs`` and the unknown-path page in a real Chromium against a real ``signoff serve``.

Swagger UI comes from the server itself (the ``fastapi-offline`` package's copy) and starts
under the app's CSP: the operations are listed, opening one breaks no CSP rule, and the
browser asks nothing of any host but the server (anything else is aborted and recorded).
An unknown path opened in the browser is the error page, in the inbox's stylesheet, with
markup in the path shown as text.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING
from urllib.parse import quote

import pytest

from tests.serving import Server, serve_for_module
from tests.web.browser import CHROMIUM, CHROMIUM_ARGS, need_chromium

if TYPE_CHECKING:
    from playwright.sync_api import Page, Route

SUBMIT = "#operations-requests-submit_api_v1_requests_post"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One ``signoff serve`` for the module."""
    yield from serve_for_module(tmp_path_factory.mktemp("api-docs"))


class Watched:
    """A page whose console messages and off-server requests are recorded."""

    def __init__(self, page: Page, base: str) -> None:
        self.page = page
        self.console: list[str] = []
        self.elsewhere: list[str] = []
        page.on("console", lambda message: self.console.append(message.text))

        def only_here(route: Route) -> None:
            if route.request.url.startswith(f"{base}/"):
                route.continue_()
            else:
                self.elsewhere.append(route.request.url)
                route.abort()

        page.route("**/*", only_here)

    def csp_errors(self) -> list[str]:
        """Console lines about a Content Security Policy violation."""
        return [text for text in self.console if "Content Security Policy" in text]


@pytest.fixture(scope="module")
def browser_page(server: Server) -> Iterator[Watched]:
    """One headless Chromium page for the module, watched."""
    need_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page()
        yield Watched(page, server.base)
        browser.close()


def test_docs_lists_the_operations_from_local_assets_under_the_csp(
    server: Server, browser_page: Watched
) -> None:
    page = browser_page.page
    response = page.goto(f"{server.base}/docs")
    assert response is not None and response.status == 200
    csp = response.headers["content-security-policy"]
    assert "script-src 'self';" in csp and "style-src 'self';" in csp
    assert "unsafe" not in csp
    block = page.locator(SUBMIT)
    block.wait_for(state="visible", timeout=15_000)
    assert "POST" in block.inner_text() and "/api/v1/requests" in block.inner_text()
    assert page.locator(".opblock").count() > 20  # every route, not just one
    # opening an operation draws its parameters (the stylesheet's data: icons among them)
    block.locator(".opblock-summary-control").click()
    page.locator(f"{SUBMIT} .opblock-body").wait_for(state="visible", timeout=5_000)
    page.get_by_role("button", name="Try it out").first.click()
    page.locator(f"{SUBMIT} .execute").wait_for(state="visible", timeout=5_000)
    assert browser_page.csp_errors() == []
    assert browser_page.elsewhere == []


def test_an_unknown_page_is_the_styled_error_page_with_the_path_as_text(
    server: Server, browser_page: Watched
) -> None:
    page = browser_page.page
    path = '/nowhere/<img src=x onerror="document.title=1">'
    response = page.goto(f"{server.base}{quote(path)}")
    assert response is not None and response.status == 404
    assert response.headers["content-type"].startswith("text/html")
    assert page.title() == "Not Found · signoff"
    assert "<img" in page.locator("#error-path").inner_text()
    assert page.locator("main img").count() == 0
    # the inbox's stylesheet applies: the sign-in page's card, at the width the CSS gives it
    width = page.evaluate("getComputedStyle(document.querySelector('main.login')).maxWidth")
    assert width == "420px"
    page.get_by_role("link", name="Go to the inbox").wait_for(state="visible")
    assert browser_page.csp_errors() == []
    assert browser_page.elsewhere == []

"""Helpers for tests of the inbox page: a signed-in context, the cards shown, and an init
script that records the browser notifications a page shows while its tab is hidden."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tests.serving import Server
from tests.web.browser import sign_in

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, Locator, Page

RECORD_NOTIFICATIONS = """
(() => {
  const Real = window.Notification;
  window.__notes = [];
  class Recorded {
    constructor(title, options = {}) {
      if (window.__illegal) throw new TypeError("Illegal constructor");
      this.title = title;
      this.body = options.body;
      this.tag = options.tag;
      window.__notes.push(this);
    }
    close() {}
    static get permission() { return Real.permission; }
    static requestPermission() { return Real.requestPermission(); }
  }
  window.Notification = Recorded;
  window.__shown = false;
  Object.defineProperty(Document.prototype, "visibilityState", {
    get: () => (window.__shown ? "visible" : "hidden"),
  });
  Object.defineProperty(Document.prototype, "hidden", { get: () => !window.__shown });
})();
"""
"""Records each ``new Notification(...)`` in ``window.__notes`` (title, body, tag, onclick)
and makes ``document.visibilityState`` report ``hidden`` (``visible`` once the page sets
``window.__shown = true``); with ``window.__illegal = true`` the constructor throws, as
Android's Chrome does."""


def open_inbox(
    browser: Browser,
    server: Server,
    errors: list[str],
    *,
    notifications: bool | None = None,
    **options: Any,
) -> tuple[BrowserContext, Page]:
    """A new context signed in to the inbox, its page errors added to ``errors``.
    ``notifications``: record notifications with the tab hidden, the permission granted
    (True) or not (False). ``options`` go to ``new_context``."""
    if notifications:
        options["permissions"] = ["notifications"]
    context = browser.new_context(viewport={"width": 1200, "height": 900}, **options)
    if notifications is not None:
        context.add_init_script(RECORD_NOTIFICATIONS)
    page = context.new_page()
    page.on("pageerror", lambda e: errors.append(str(e)))
    assert server.admin_token is not None
    sign_in(page, server.base, server.admin_token)
    return context, page


def notes(page: Page) -> list[dict[str, str]]:
    """The notifications the page has shown: title, body and tag of each."""
    got: list[dict[str, str]] = page.evaluate(
        "() => window.__notes.map(n => ({title: n.title, body: n.body, tag: n.tag}))"
    )
    return got


def card(request_id: str) -> str:
    """The selector of one request's card."""
    return f'article.card[data-id="{request_id}"]'


def shown(within: Page | Locator) -> list[str]:
    """The ids of the cards shown (in ``within``), in order."""
    ids: list[str] = within.locator("article.card").evaluate_all("cs => cs.map(c => c.dataset.id)")
    return ids


def wait_shown(page: Page, ids: list[str]) -> None:
    """Wait until exactly ``ids`` are shown (in any order)."""
    page.wait_for_function(
        "want => JSON.stringify([...document.querySelectorAll('article.card')]"
        ".map(c => c.dataset.id).sort()) === JSON.stringify(want)",
        arg=sorted(ids),
        timeout=10_000,
    )

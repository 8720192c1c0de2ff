"""The web inbox as a decider: one signed-in page in real headless Chromium, held per module.

Playwright's sync API must stay on the thread that started it and off the test's event loop,
so every browser call runs on one worker thread of its own.
"""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from tests.paths.scenarios import PathsServer
from tests.web.browser import CHROMIUM, CHROMIUM_ARGS, sign_in

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, Playwright


class WebInbox:
    """The inbox page, signed in as the admin through the login link and its confirm button."""

    def __init__(self, paths: PathsServer) -> None:
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chromium")
        self.errors: list[str] = []
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None
        self.page: Page = self.pool.submit(self._open, paths).result(timeout=120)

    def _open(self, paths: PathsServer) -> Page:
        from playwright.sync_api import sync_playwright

        self._playwright = sync_playwright().start()
        self._browser = self._playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_ARGS
        )
        page = self._browser.new_context(viewport={"width": 1200, "height": 900}).new_page()
        page.on("pageerror", lambda e: self.errors.append(str(e)))
        sign_in(page, paths.server.base, paths.admin_token)
        return page

    async def decide(self, request_id: str, decision: dict[str, Any]) -> None:
        """Make ``decision`` with the card's own controls; returns once the card has gone."""
        await asyncio.wrap_future(self.pool.submit(self._decide, request_id, decision))

    def _decide(self, request_id: str, decision: dict[str, Any]) -> None:
        page = self.page
        card = f'article.card[data-id="{request_id}"]'
        page.wait_for_selector(card, timeout=15_000)
        kind = decision["type"]
        if kind == "approve" and "args" in decision:
            page.click(f"{card} [data-action=edit]")
            page.click(f"{card} [data-action=raw-json]")
            page.fill(f"{card} [data-role=args-editor]", json.dumps(decision["args"]))
            page.click(f"{card} [data-action=review-edit]")
            page.click(f"{card} [data-role=edit-review] [data-action=approve-edited]")
        elif kind == "approve":
            page.click(f"{card} [data-action=approve]")
        elif kind == "reject":
            page.fill(f"{card} [data-role=reason]", decision["reason"])
            page.click(f"{card} [data-action=reject]")
        elif kind == "respond":
            page.fill(f"{card} [data-role=feedback]", decision["feedback"])
            page.click(f"{card} [data-action=respond]")
        elif kind == "choose":
            page.click(f'{card} [data-option="{decision["choice"]}"]')
        elif kind == "answer":
            for question, text in decision["answers"].items():
                page.fill(f'{card} [data-question="{question}"]', text)
            page.fill(f"{card} [data-role=answer-feedback]", decision["feedback"])
            page.click(f"{card} [data-action=answer]")
        else:
            raise AssertionError(kind)
        page.wait_for_selector(card, state="detached", timeout=15_000)

    def close(self) -> None:
        """Close Chromium and Playwright on their own thread."""

        def shut() -> None:
            if self._browser is not None:
                self._browser.close()
            if self._playwright is not None:
                self._playwright.stop()

        self.pool.submit(shut).result(timeout=60)
        self.pool.shutdown()

"""Real headless Chromium (Debian's package) driven by Playwright, for the inbox tests."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from signoff.server.app import API
from tests.serving import Server, bearer

CHROMIUM = os.environ.get("SIGNOFF_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
SCREENSHOTS = Path(os.environ.get("SIGNOFF_SCREENSHOTS", "test-artifacts"))
"""Where the browser tests leave their screenshots, to be looked at."""


def need_chromium() -> None:
    """Skip (or, in CI, fail) when Chromium or Playwright is missing."""
    reason = None
    if not Path(CHROMIUM).exists():
        reason = f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        reason = "playwright is not installed (pip install playwright)"
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)


def launched_chromium() -> Iterator[Any]:
    """Headless Chromium for a module's ``browser`` fixture (``yield from``): skipped without
    it, closed when the module is done."""
    need_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def sign_in(page: Any, base: str, token: str) -> None:
    """Sign ``page`` in to the inbox at ``base`` through the confirmed login link, until live."""
    page.goto(f"{base}/login?token={token}")
    page.click("#confirm-sign-in")
    page.wait_for_url(f"{base}/")
    page.wait_for_selector("#live[data-state=live]")


class Agent:
    """An agent talking to a real server over HTTP, as an integration would."""

    def __init__(self, server: Server, token: str) -> None:
        self.http = httpx.Client(base_url=server.base, headers=bearer(token), timeout=60)

    def submit(self, **body: Any) -> dict[str, Any]:
        """POST a request; its JSON."""
        response = self.http.post(f"{API}/requests", json={"session_id": "web", **body})
        assert response.status_code == 201, response.text
        created: dict[str, Any] = response.json()
        return created

    def get(self, request_id: str) -> dict[str, Any]:
        """The request as it is now."""
        got: dict[str, Any] = self.http.get(f"{API}/requests/{request_id}").json()
        return got

    def wait_in_background(self, request_id: str) -> Callable[[], dict[str, Any]]:
        """Start a long-poll ``wait``; the returned function joins it and gives its answer."""
        answer: dict[str, Any] = {}

        def wait() -> None:
            response = self.http.get(f"{API}/requests/{request_id}/wait?timeout=45")
            answer.update(response.json())

        thread = threading.Thread(target=wait, daemon=True)
        thread.start()

        def join() -> dict[str, Any]:
            thread.join(timeout=50)
            assert not thread.is_alive(), "wait did not return"
            return answer

        return join

    def close(self) -> None:
        """Close the connection pool."""
        self.http.close()

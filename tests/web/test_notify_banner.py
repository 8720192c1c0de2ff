"""The inbox names a notification route that cannot send, in real headless Chromium."""

from __future__ import annotations

import os
import time
from pathlib import Path

import httpx

from signoff.server.app import API
from tests.serving import agent_token, bearer, free_port, start_server
from tests.web.browser import CHROMIUM, CHROMIUM_ARGS, Agent, need_chromium, sign_in


def test_a_failing_route_is_named_in_a_banner_on_the_inbox(tmp_path: Path) -> None:
    """A route whose target refuses connections shows, with its error, on the inbox as text
    and in the server's log; with no failing route there is no banner."""
    need_chromium()
    from playwright.sync_api import sync_playwright

    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path)}
    server = start_server(
        f"sqlite:///{tmp_path / 'serve.db'}", free_port(), env, "--allow-private-webhooks"
    )
    agent = Agent(server, agent_token(server))
    try:
        assert server.admin_token is not None
        with sync_playwright() as p:
            chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = chromium.new_page()
            sign_in(page, server.base, server.admin_token)
            assert page.locator("#notify-failing").is_hidden()
            with httpx.Client(base_url=server.base, headers=bearer(server.admin_token)) as http:
                spec = {
                    "name": "pager",
                    "channel": {"type": "webhook", "url": f"http://127.0.0.1:{free_port()}/x"},
                }
                assert http.post(f"{API}/notify/routes", json=spec).status_code == 201
                agent.submit(tool_name="deploy", tool_args={})
                deadline = time.monotonic() + 20
                while not http.get(f"{API}/notify/failing").json()["items"]:
                    assert time.monotonic() < deadline, "the route never failed"
                    time.sleep(0.1)
            page.reload()
            banner = page.locator("#notify-failing")
            banner.wait_for(state="visible")
            text = banner.inner_text()
            assert "Notifications failing: pager (ConnectError" in text
            assert banner.locator("*").count() == 0  # text only, no markup
            chromium.close()
    finally:
        agent.close()
        server.process.terminate()
        _, log = server.process.communicate(timeout=20)
    assert "signoff.notify WARNING notify: route pager failed to send new notice" in log

"""signoff mcp-proxy sends an MCP client's person to the request's page (URL-mode elicitation).

The official MCP client, declaring URL mode, launches ``signoff mcp-proxy`` (talking to a real
``signoff serve``) in front of the real test child; the link it is shown is opened in headless
Chromium as a signed-in person, who approves there.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

pytest.importorskip("mcp", reason="needs the MCP SDK: pip install 'signoff[mcp]'")

import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.context import ClientRequestContext
from mcp.client.session import IncomingMessage

from signoff.integrations.mcp.proxy import DECLINED
from signoff.server.app import API
from tests.integrations.mcp_testing import decide, pending_request, text
from tests.integrations.test_mcp_proxy import calls, proxy_args
from tests.serving import Server, agent_token, bearer, serve_for_module
from tests.web.browser import CHROMIUM, CHROMIUM_ARGS, need_chromium

if TYPE_CHECKING:
    from playwright.sync_api import Browser


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One real server for the module; each test leaves no request pending."""
    yield from serve_for_module(tmp_path_factory.mktemp("mcp_links"))


@pytest.fixture
async def api(server: Server) -> AsyncIterator[httpx.AsyncClient]:
    """The server's HTTP API as the admin."""
    assert server.admin_token is not None
    async with httpx.AsyncClient(
        base_url=server.base, headers=bearer(server.admin_token), timeout=30
    ) as http:
        yield http


class LinkClient:
    """What the MCP client's person is shown, and the completion notifications it gets."""

    def __init__(self, action: str = "accept") -> None:
        self.action = action
        self.links: list[types.ElicitRequestURLParams] = []
        self.shown = asyncio.Event()
        self.completed: list[str] = []

    async def show(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        """The elicitation callback: only ever a link; the person accepts or declines it."""
        assert isinstance(params, types.ElicitRequestURLParams), params
        self.links.append(params)
        self.shown.set()
        return types.ElicitResult(action="accept" if self.action == "accept" else "decline")

    async def notified(self, message: IncomingMessage) -> None:
        """The message handler: records elicitation-complete notifications."""
        if isinstance(message, types.ElicitCompleteNotification):
            self.completed.append(message.params.elicitation_id)


@asynccontextmanager
async def linked(
    server: Server, log: Path, person: LinkClient, *extra: str, mode: str = "legacy"
) -> AsyncIterator[Client]:
    """The official client, declaring elicitation, with the proxy over stdio."""
    params = StdioServerParameters(
        command=sys.executable,
        args=proxy_args(server, agent_token(server), log, *extra),
        env=server.env,
    )
    async with Client(
        params,
        mode=mode,
        cache=None,
        elicitation_callback=person.show,
        message_handler=person.notified,
    ) as client:
        yield client


def approve_in_browser(server: Server, link: str, request_id: str) -> str:
    """Open ``link`` in Chromium, sign in as the admin from the page it leads to (the link,
    query and all, survives signing in) and approve there; the card's text."""
    need_chromium()
    from playwright.sync_api import sync_playwright

    admin = server.admin_token
    assert admin is not None
    with sync_playwright() as p:
        browser: Browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(viewport={"width": 1200, "height": 900}).new_page()
            page.goto(link)
            assert "/login" in page.url  # a link alone decides nothing: sign in first
            page.fill("#token", admin)
            page.click("button[type=submit]")
            page.wait_for_url(link)
            page.wait_for_selector("#live[data-state=live]")
            card = f'article.card[data-id="{request_id}"]'
            page.click(f"{card} [data-action=approve]")
            page.wait_for_selector(f"{card}[data-status=approved], {card}[data-status=completed]")
            return page.inner_text(card)
        finally:
            browser.close()


async def _decision(api: httpx.AsyncClient, request_id: str) -> dict[str, Any]:
    got: dict[str, Any] = (await api.get(f"{API}/requests/{request_id}")).json()
    return got


async def test_the_client_is_sent_to_the_requests_page_and_a_browser_approval_runs_the_call(
    server: Server, api: httpx.AsyncClient, tmp_path: Path
) -> None:
    """The link is the request's page (``?via=mcp-url``); approved there in Chromium, the call
    runs once, the client gets the completion notification for that elicitation, and the
    decision is a person's, recorded ``via: mcp-url`` in the request and its audit trail."""
    need_chromium()  # before a request is made: a skip must leave none pending for the next test
    log = tmp_path / "calls.jsonl"
    person = LinkClient()
    async with linked(server, log, person) as client:
        call = asyncio.create_task(client.call_tool("delete_file", {"path": "/tmp/u"}))
        await asyncio.wait_for(person.shown.wait(), 30)
        pending = await pending_request(api)
        link = person.links[0]
        assert link.url == f"{server.base}/requests/{pending['id']}?via=mcp-url"
        assert "delete_file" in link.message and pending["id"] in link.message
        assert link.elicitation_id
        assert pending["context"]["elicitation"] == "mcp-url"
        card = await asyncio.to_thread(approve_in_browser, server, link.url, pending["id"])
        result = await asyncio.wait_for(call, 30)
    assert not result.is_error and text(result) == "deleted /tmp/u"
    assert calls(log) == [{"tool": "delete_file", "args": {"path": "/tmp/u"}}]
    assert person.completed == [link.elicitation_id]
    decided = await _decision(api, pending["id"])
    assert decided["status"] == "completed"
    assert decided["decision"]["via"] == "mcp-url" and decided["decision"]["decided_by"] == "admin"
    assert "(via mcp-url)" in card
    assert decided["context"]["elicitation"] == "mcp-url"
    audit = (await api.get(f"{API}/audit", params={"request_id": pending["id"]})).json()
    [decide_entry] = [e for e in audit["items"] if e["action"] == "decide"]
    assert decide_entry["actor"] == "admin" and decide_entry["details"]["via"] == "mcp-url"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_client_that_declines_the_link_has_the_call_rejected(
    server: Server, api: httpx.AsyncClient, tmp_path: Path, mode: str
) -> None:
    """Declined in the client: the call is a tool error naming that, nothing runs, and the
    request is withdrawn with that reason in its audit trail."""
    log = tmp_path / "calls.jsonl"
    person = LinkClient("decline")
    async with linked(server, log, person, mode=mode) as client:
        result = await client.call_tool("delete_file", {"path": f"/tmp/v-{mode}"})
    assert result.is_error and DECLINED in text(result)
    assert calls(log) == []
    assert len(person.links) == 1 and person.completed == []
    [request] = [
        r
        for r in (await api.get(f"{API}/requests")).json()["items"]
        if r["tool_args"] == {"path": f"/tmp/v-{mode}"} and r["context"]["elicitation"] == "mcp-url"
    ]
    assert request["status"] == "canceled"
    audit = (await api.get(f"{API}/audit", params={"request_id": request["id"]})).json()
    cancels = [e for e in audit["items"] if e["action"] == "cancel"]
    assert len(cancels) == 1 and cancels[0]["details"]["reason"] == DECLINED


async def test_on_the_2026_protocol_the_link_comes_as_input_required_and_the_retry_waits(
    server: Server, api: httpx.AsyncClient, tmp_path: Path
) -> None:
    """On 2026-07-28 the link arrives in input_required (no elicitation id); the client's
    retry is held until the inbox approves, then the call runs."""
    log = tmp_path / "calls.jsonl"
    person = LinkClient()
    public = "https://signoff.example.com/inbox/"
    async with linked(server, log, person, "--public-url", public, mode="auto") as client:
        call = asyncio.create_task(client.call_tool("delete_file", {"path": "/tmp/w"}))
        await asyncio.wait_for(person.shown.wait(), 30)
        pending = await pending_request(api)
        link = person.links[0]
        assert link.url == f"https://signoff.example.com/inbox/requests/{pending['id']}?via=mcp-url"
        assert link.elicitation_id is None
        await decide(api, pending["id"], {"type": "approve"})
        result = await asyncio.wait_for(call, 30)
    assert text(result) == "deleted /tmp/w"
    assert calls(log) == [{"tool": "delete_file", "args": {"path": "/tmp/w"}}]

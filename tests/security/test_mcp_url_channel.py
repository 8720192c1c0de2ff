"""Attack: a link or an API caller names the channel a decision came through.

A request's page opened as ``?via=mcp-url`` (the link ``signoff mcp-proxy`` gives an MCP
client) records its decisions ``via: mcp-url``; that exact value is the only one the page
passes on, and the decision endpoint refuses any channel a client may not name: Slack and
email-link decisions arrive only through their own verified endpoints, and an agent decides
nothing whatever channel it names.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from signoff.server.app import API
from tests.serving import Server, agent_token, bearer, serve_for_module
from tests.web.browser import CHROMIUM, CHROMIUM_ARGS, need_chromium, sign_in

if TYPE_CHECKING:
    from playwright.sync_api import Browser


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One real server for the module; each test files its own requests."""
    yield from serve_for_module(tmp_path_factory.mktemp("mcp_url_channel"))


@pytest.fixture(scope="module")
def agent(server: Server) -> Iterator[httpx.Client]:
    """The agent filing requests over HTTP."""
    with httpx.Client(
        base_url=server.base, headers=bearer(agent_token(server)), timeout=30
    ) as http:
        yield http


@pytest.fixture(scope="module")
def admin(server: Server) -> Iterator[httpx.Client]:
    """The admin, a person who may decide, over HTTP."""
    assert server.admin_token is not None
    with httpx.Client(base_url=server.base, headers=bearer(server.admin_token), timeout=30) as http:
        yield http


def _file(agent: httpx.Client, path: str) -> dict[str, Any]:
    answer = agent.post(
        f"{API}/requests",
        json={"session_id": "mcp-url", "tool_name": "delete_file", "tool_args": {"path": path}},
    )
    assert answer.status_code == 201, answer.text
    request: dict[str, Any] = answer.json()
    assert request["status"] == "pending"
    return request


def _decide(http: httpx.Client, request_id: str, **params: str) -> httpx.Response:
    return http.post(
        f"{API}/requests/{request_id}/decision", params=params, json={"type": "approve"}
    )


@pytest.mark.parametrize("via", ["slack", "email-link", "grant", "policy", "expiry", "MCP-URL", ""])
def test_the_endpoint_refuses_a_channel_a_client_may_not_name(
    agent: httpx.Client, admin: httpx.Client, via: str
) -> None:
    """Anything but person, mcp-elicitation or mcp-url is a 422 and leaves the request pending."""
    request = _file(agent, f"/tmp/chan-{via}")
    refused = _decide(admin, request["id"], via=via)
    assert refused.status_code == 422, refused.text
    assert set(refused.json()) >= {"error", "detail"}
    assert admin.get(f"{API}/requests/{request['id']}").json()["status"] == "pending"
    assert _decide(admin, request["id"]).status_code == 200  # leave nothing pending


def test_mcp_url_is_a_persons_channel_only(agent: httpx.Client, admin: httpx.Client) -> None:
    """An agent naming mcp-url still decides nothing (403); mcp-url takes no client name;
    a person's mcp-url decision is recorded so in the request and its audit trail."""
    request = _file(agent, "/tmp/chan-agent")
    assert _decide(agent, request["id"], via="mcp-url").status_code == 403
    named = _decide(admin, request["id"], via="mcp-url", client="claude")
    assert named.status_code == 422, named.text
    assert admin.get(f"{API}/requests/{request['id']}").json()["status"] == "pending"
    decided = _decide(admin, request["id"], via="mcp-url")
    assert decided.status_code == 200, decided.text
    assert decided.json()["decision"]["via"] == "mcp-url"
    audit = admin.get(f"{API}/audit", params={"request_id": request["id"]}).json()["items"]
    assert [e["details"]["via"] for e in audit if e["action"] == "decide"] == ["mcp-url"]


def test_only_mcp_url_on_a_page_reaches_the_decision(
    server: Server, agent: httpx.Client, admin: httpx.Client
) -> None:
    """Only ``?via=mcp-url`` survives signing in and reaches the decision: a page opened with
    ``via=slack``, ``email-link`` or junk decides as the inbox does (``via: person``)."""
    need_chromium()
    from playwright.sync_api import sync_playwright

    assert server.admin_token is not None
    vias = ["slack", "email-link", "MCP-URL", "mcp-url%20x", "mcp-url"]
    requests = [_file(agent, f"/tmp/page-{n}") for n in range(len(vias))]
    with sync_playwright() as p:
        browser: Browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(viewport={"width": 1200, "height": 900}).new_page()
            for request, via in zip(requests, vias, strict=True):
                page.goto(f"{server.base}/requests/{request['id']}?via={via}")
                kept = "?via=mcp-url" if via == "mcp-url" else ""
                assert parse_qs(urlsplit(page.url).query)["next"] == [
                    f"/requests/{request['id']}{kept}"
                ]
            sign_in(page, server.base, server.admin_token)
            for request, via in zip(requests, vias, strict=True):
                page.goto(f"{server.base}/requests/{request['id']}?via={via}")
                card = f'article.card[data-id="{request["id"]}"]'
                page.click(f"{card} [data-action=approve]")
                page.wait_for_selector(f"{card}[data-status=approved]")
        finally:
            browser.close()
    for request, via in zip(requests, vias, strict=True):
        decided = admin.get(f"{API}/requests/{request['id']}").json()
        expected = "mcp-url" if via == "mcp-url" else "person"
        assert decided["decision"]["via"] == expected, (via, decided["decision"])
        assert decided["decision"]["decided_by"] == "admin"

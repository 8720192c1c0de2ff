"""The web inbox shows agent text exactly: big integers unrounded, hidden characters as escapes.

An agent that sends ``9007199254740993`` must not be shown (or approved as) ``…992``; a
right-to-left override or an ESC in its tool name or args must show as ``\\u202e`` /
``\\x1b``, not act on the page. Real Chromium against a real ``signoff serve``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from signoff.server.app import API
from tests.serving import Server, agent_token
from tests.web.browser import (
    Agent,
    launched_chromium,
    sign_in,
)

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

BIG = 9007199254740993
"""2^53 + 1: the first integer a double cannot hold (JSON.parse makes it ...992)."""
RLO = "\u202e"
ARGS = {"n": BIG, "s": f"abc{RLO}def"}
TOOL = "delete_prod_database\x1b]0;pwned\x07"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One Chromium for the module."""
    yield from launched_chromium()


@pytest.fixture
def agent(server: Server) -> Iterator[Agent]:
    """The adversary: an agent token on the test's server."""
    client = Agent(server, agent_token(server))
    yield client
    client.close()


@pytest.fixture
def page(browser: Browser, server: Server) -> Iterator[Page]:
    """A page signed in as the admin through the confirmed login link."""
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda e: errors.append(str(e)))
    assert server.admin_token is not None
    sign_in(tab, server.base, server.admin_token)
    yield tab
    context.close()
    assert errors == [], errors


def card(request_id: str) -> str:
    """The selector of one request's card."""
    return f'article.card[data-id="{request_id}"]'


def raw(agent: Agent, request_id: str) -> str:
    """The request as the server's own JSON text (no float in between)."""
    return agent.http.get(f"{API}/requests/{request_id}").text


def test_inbox_shows_big_integers_exactly_and_bidi_as_escapes(
    page: Page, agent: Agent, server: Server
) -> None:
    """A card (and the request page) shows 9007199254740993, \\u202e and \\x1b as text."""
    created = agent.submit(tool_name=TOOL, tool_args=ARGS)
    selector = card(created["id"])
    for url in (None, f"{server.base}/requests/{created['id']}"):
        if url is not None:
            page.goto(url)
        page.wait_for_selector(selector)
        shown = page.inner_text(f"{selector} [data-role=args]")
        assert str(BIG) in shown and "9007199254740992" not in shown
        assert "abc\\u202edef" in shown and RLO not in shown
        title = page.inner_text(f"{selector} .title")
        assert title == "delete_prod_database\\x1b]0;pwned\\x07"
        everything = page.inner_text("body")
        assert RLO not in everything and "\x1b" not in everything and "\x07" not in everything


def test_editing_other_args_keeps_a_big_integer_exact(page: Page, agent: Agent) -> None:
    """The args editor starts from the exact text, and approving an edit sends 2^53+1 unrounded."""
    created = agent.submit(tool_name="shell", tool_args=ARGS)
    selector = card(created["id"])
    page.wait_for_selector(selector)
    page.click(f"{selector} [data-action=edit]")
    page.click(f"{selector} [data-action=raw-json]")
    editor = f"{selector} [data-role=args-editor]"
    text = page.input_value(editor)
    assert str(BIG) in text and "\\u202e" in text and RLO not in text
    page.fill(editor, text.replace("def", "xyz"))
    page.click(f"{selector} [data-action=review-edit]")
    page.click(f"{selector} [data-action=approve-edited]")
    page.wait_for_selector(selector, state="detached")
    decided = agent.get(created["id"])
    assert decided["status"] == "approved"
    assert decided["approved_args"] == {"n": BIG, "s": f"abc{RLO}xyz"}
    assert "9007199254740992" not in raw(agent, created["id"])


def test_choice_options_show_escaped_and_choose_the_exact_option(page: Page, agent: Agent) -> None:
    """An option with a bidi override is shown escaped; clicking it chooses the exact text."""
    option = f"keep{RLO}txt.exe"
    created = agent.submit(kind="choice", prompt=f"pick\x1b[2K{RLO}", options=[option, "drop"])
    selector = card(created["id"])
    page.wait_for_selector(selector)
    button = f"{selector} button.option >> nth=0"
    assert page.inner_text(button) == "Choose keep\\u202etxt.exe"
    assert page.inner_text(f"{selector} .title") == "pick\\x1b[2K\\u202e"
    page.click(button)
    page.wait_for_selector(selector, state="detached")
    assert agent.get(created["id"])["decision"]["decision"]["choice"] == option

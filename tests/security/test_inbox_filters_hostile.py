"""Hostile agent text in the inbox's notifications, filters and groups, and hostile filter
values in the inbox's address: all stay text. Real Chromium against one real ``signoff serve``.

An agent chooses its session id, tool name, args and prompts; they become a browser
notification's title and body, the filters' choices and the groups' heads. None may run
script, make markup, smuggle terminal or bidi controls into a notification, or grow one
past its cap; a search is text the server matches, never a pattern or a query fragment.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING
from urllib.parse import quote

import httpx
import pytest

from signoff.server.app import API
from tests.serving import Server, agent_token, bearer, serve_for_module
from tests.web.browser import Agent, launched_chromium
from tests.web.inbox_pages import card, notes, open_inbox, shown, wait_shown

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

SESSION = '<img src=x onerror="window.__pwned=1">\u202egnp.exe'
TOOL = "<script>window.__pwned=2</script>\x1b]0;owned\x07\u2066"
HIDDEN = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")
"""What must never reach a notification as itself: controls, bidi and zero-width marks."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One real server for the module."""
    yield from serve_for_module(tmp_path_factory.mktemp("inbox-hostile"))


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One Chromium for the module."""
    yield from launched_chromium()


@pytest.fixture(scope="module")
def mallory(server: Server) -> Iterator[Agent]:
    """The adversary: an agent token."""
    agent = Agent(server, agent_token(server, "mallory"))
    yield agent
    agent.close()


@pytest.fixture
def errors() -> Iterator[list[str]]:
    """Page errors; none is expected."""
    raised: list[str] = []
    yield raised
    assert raised == []


@pytest.fixture(autouse=True)
def leave_nothing_pending(server: Server) -> Iterator[None]:
    """Each test starts with an empty queue: what it left pending is rejected after it."""
    yield
    assert server.admin_token is not None
    with httpx.Client(base_url=server.base, headers=bearer(server.admin_token)) as http:
        left = http.get(f"{API}/requests", params={"status": "pending", "limit": 200}).json()
        if ids := [r["id"] for r in left["items"]]:
            http.post(f"{API}/decisions", json={"ids": ids, "type": "reject", "reason": "over"})


def unharmed(page: Page) -> None:
    """No agent markup became an element and no agent script ran."""
    assert page.locator("main img, main script").count() == 0
    assert page.evaluate("() => window.__pwned") is None


def test_a_notification_carries_hostile_text_as_capped_visible_text(
    browser: Browser, server: Server, mallory: Agent, errors: list[str]
) -> None:
    """Markup, terminal escapes, bidi overrides and newlines in a tool call or a prompt
    reach a notification as visible escapes on one line, at most 160 characters."""
    context, page = open_inbox(browser, server, errors, notifications=True)
    page.click("[data-action=notify]")
    page.wait_for_function("() => localStorage.getItem('signoff.notify') === 'on'")
    mallory.submit(session_id=SESSION, tool_name=TOOL, tool_args={"cmd": "rm -rf /\n" + "A" * 5000})
    mallory.submit(
        session_id=SESSION, kind="choice", prompt="Pick\n\u202eone\x07", options=["<b>x</b>"]
    )
    page.wait_for_function("() => window.__notes.length === 2", timeout=10_000)
    call, choice = notes(page)
    for note in (call, choice):
        assert not HIDDEN.search(note["title"] + note["body"]), note
        assert len(note["body"]) <= 160
        assert note["title"] == "signoff: mallory asks"
    assert call["body"].startswith(
        '<script>window.__pwned=2</script>\\x1b]0;owned\\x07\\u2066 {"cmd":"rm -rf /\\n'
    )
    assert call["body"].endswith("AAA…")
    assert choice["body"] == "Pick \\u202eone\\x07 (<b>x</b>)"
    unharmed(page)
    context.close()


def test_hostile_filter_choices_groups_and_searches_stay_text(
    browser: Browser, server: Server, mallory: Agent, errors: list[str]
) -> None:
    """An agent's session and tool are choices shown escaped that filter exactly; a group's
    head shows them as text; searches with SQL or pattern characters match only as text;
    markup in the address's filters is a field's value, never the page's."""
    hostile = mallory.submit(session_id=SESSION, tool_name=TOOL, tool_args={"n": 1})
    plain = mallory.submit(session_id="plain", tool_name="ls", tool_args={"path": "100%"})
    context, page = open_inbox(browser, server, errors)
    wait_shown(page, [hostile["id"], plain["id"]])
    session_option = page.locator("[data-filter=session_id] option", has_text="gnp.exe")
    assert session_option.get_attribute("value") == SESSION  # the exact value filters
    assert session_option.inner_text() == '<img src=x onerror="window.__pwned=1">\\u202egnp.exe'
    page.select_option("[data-filter=session_id]", SESSION)
    wait_shown(page, [hostile["id"]])
    page.select_option("[data-filter=tool_name]", TOOL)
    wait_shown(page, [hostile["id"]])

    page.click("[data-action=clear-filters]")
    page.check("[data-role=group-by-session]")
    head = page.locator("section.group").filter(has=page.locator(card(hostile["id"])))
    toggle = head.locator("[data-action=toggle-group]")
    assert toggle.inner_text() == 'session <img src=x onerror="window.__pwned=1">\\u202egnp.exe'
    assert toggle.locator("*").count() == 0
    page.uncheck("[data-role=group-by-session]")

    for text, matches in [
        ("' OR '1'='1", []),
        ("%", [plain["id"]]),  # only the args that hold a % sign
        ("_", [hostile["id"]]),  # the one underscore is in its tool name
        ('") OR 1=1 --', []),
        ("100%", [plain["id"]]),
    ]:
        page.fill("[data-filter=q]", text)
        wait_shown(page, matches)
        assert page.inner_text("[data-role=filter-error]") == ""

    script = "<script>window.__pwned=3</script>"
    page.goto(f"{server.base}/?q={quote(script)}&session_id={quote(SESSION)}&kind=%3Cb%3E")
    page.wait_for_selector("#live[data-state=live]")
    assert page.input_value("[data-filter=q]") == script
    assert page.input_value("[data-filter=session_id]") == SESSION
    assert page.input_value("[data-filter=kind]") == ""  # not a kind: no filter
    wait_shown(page, [])
    assert shown(page) == []
    unharmed(page)
    context.close()

"""Rejecting in the web inbox, in real headless Chromium against a real ``signoff serve``:
the Reject button refuses until a reason is given, a quick pick fills the reason in (still
editable), and the agent waiting on the request is told exactly that reason."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from signoff.domain.decisions import QUICK_REASONS, REASON_REQUIRED
from tests.serving import Server, agent_token, serve_for_module
from tests.web.browser import CHROMIUM, CHROMIUM_ARGS, Agent, need_chromium, sign_in

if TYPE_CHECKING:
    from playwright.sync_api import Page

REASONS_JS = Path(__file__).parents[2] / "src/signoff/web/static/reasons.js"


def test_the_quick_reasons_are_the_same_in_python_and_the_web() -> None:
    """static/reasons.js lists the quick picks and the rule's words as the domain does."""
    source = REASONS_JS.read_text()
    listed = re.search(r"QUICK_REASONS = Object\.freeze\((\[.*?\])\)", source, re.S)
    assert listed is not None
    assert tuple(json.loads(re.sub(r",\s*\]", "]", listed.group(1)))) == QUICK_REASONS
    assert f'REASON_REQUIRED = "{REASON_REQUIRED}"' in source


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server for the module."""
    yield from serve_for_module(tmp_path_factory.mktemp("reject-web"))


@pytest.fixture(scope="module")
def agent(server: Server) -> Iterator[Agent]:
    """An agent with its own token."""
    client = Agent(server, agent_token(server))
    yield client
    client.close()


@pytest.fixture(scope="module")
def page(server: Server) -> Iterator[Page]:
    """One Chromium page signed in as the admin; no script error may happen on it."""
    need_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        tab = browser.new_context(viewport={"width": 1200, "height": 900}).new_page()
        errors: list[str] = []
        tab.on("pageerror", lambda e: errors.append(str(e)))
        assert server.admin_token is not None
        sign_in(tab, server.base, server.admin_token)
        yield tab
        browser.close()
        assert errors == [], errors


def _card(request_id: str) -> str:
    return f'article.card[data-id="{request_id}"]'


def test_reject_needs_a_reason_and_a_quick_pick_fills_it(page: Page, agent: Agent) -> None:
    """Blank: the button stays disabled and Enter says why, nothing is sent; a quick pick
    fills the field, an edit is kept, and the waiting agent gets that reason."""
    created = agent.submit(tool_name="shell", tool_args={"command": "rm -rf build"})
    waited = agent.wait_in_background(created["id"])
    card = _card(created["id"])
    button, field = f"{card} [data-action=reject]", f"{card} [data-role=reason]"
    page.wait_for_selector(button)
    assert page.is_disabled(button)
    assert page.get_attribute(button, "title") == REASON_REQUIRED
    page.fill(field, "   ")
    assert page.is_disabled(button)
    page.press(field, "Enter")
    hint = f"{card} [data-role=reason-hint]"
    page.wait_for_selector(hint, state="visible")
    assert REASON_REQUIRED in page.inner_text(hint)
    assert agent.get(created["id"])["status"] == "pending"
    chips = page.locator(f"{card} [data-quick-reason]")
    assert chips.all_inner_texts() == list(QUICK_REASONS)
    chips.nth(1).click()
    assert page.input_value(field) == QUICK_REASONS[1]
    assert page.is_enabled(button) and page.is_hidden(hint)
    page.press(field, "End")
    page.keyboard.type(": use staging")
    page.click(button)
    answer = waited()
    assert answer["status"] == "rejected"
    assert answer["decision"]["decision"]["reason"] == f"{QUICK_REASONS[1]}: use staging"
    page.wait_for_selector(card, state="detached")


def test_the_request_page_and_a_batch_need_a_reason_too(
    page: Page, agent: Agent, server: Server
) -> None:
    """Reject selected with no batch reason says why and sends nothing; the request's own
    page offers the same quick picks and rejects with one."""
    created = agent.submit(tool_name="deploy", tool_args={"env": "prod"})
    card = _card(created["id"])
    page.wait_for_selector(card)
    page.check(f"{card} input.select")
    page.click("[data-action=reject-selected]")
    page.wait_for_selector("#toast:not([hidden])")
    assert REASON_REQUIRED in page.inner_text("#toast")
    assert agent.get(created["id"])["status"] == "pending"
    page.goto(f"{server.base}/requests/{created['id']}")
    page.click(f"{card} [data-quick-reason='{QUICK_REASONS[0]}']")
    page.click(f"{card} [data-action=reject]")
    page.wait_for_selector(f"{card} [data-role=decision]")
    decided = agent.get(created["id"])
    assert decided["decision"]["decision"]["reason"] == QUICK_REASONS[0]

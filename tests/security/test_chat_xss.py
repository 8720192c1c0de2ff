"""Markup in a chat conversation stays text: the person's prompt, and an agent's reply, tool
arguments, question, options and a rejection's reason, in real Chromium against a real
``signoff serve --agent`` hosting a hostile scripted agent."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from tests.security.chat_hostile import ARGS, OPTIONS, QUESTION, REPLY
from tests.web.browser import CHROMIUM, CHROMIUM_ARGS
from tests.web.chat_serving import (
    DECIDED,
    Chat,
    box,
    serve_chat,
    settled,
    signed_in,
    start,
    waiting_ids,
)

if TYPE_CHECKING:
    from playwright.sync_api import Dialog

PROMPT = "<script>alert('prompt')</script><img src=x onerror=alert('prompt2')>"
REASON = "<img src=x onerror=alert('reason')>"


@pytest.fixture(scope="module")
def chat(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chat]:
    """A server hosting the hostile agent."""
    yield from serve_chat(
        tmp_path_factory.mktemp("xss"), "hostile=tests.security.chat_hostile:agent"
    )


def test_markup_in_a_conversation_is_inert(chat: Chat) -> None:
    """No dialog opens, no element is made from the payloads, and each shows as its text,
    live and after a reload."""
    from playwright.sync_api import sync_playwright

    dialogs: list[str] = []

    def on_dialog(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = signed_in(browser.new_context(), chat, "alice")
        page.on("dialog", on_dialog)
        task_id = start(page, chat, PROMPT, agent="hostile")
        write_id, choice_id = waiting_ids(chat, "alice", task_id, 2)
        page.wait_for_selector(f"{box(choice_id)} [data-action=choose]")
        assert page.inner_text("[data-role=message-user] .text") == PROMPT
        assert ARGS in page.inner_text(".tool[data-call=h1] [data-role=tool-args]")
        assert page.inner_text(f"{box(choice_id)} .title") == QUESTION
        buttons = page.locator(f"{box(choice_id)} button[data-action=choose]")
        assert buttons.all_inner_texts() == [f"Choose {option}" for option in OPTIONS]
        page.fill(f"{box(write_id)} [data-role=reason]", REASON)
        page.click(f"{box(write_id)} [data-action=reject]")
        page.wait_for_selector(f"{box(write_id)}{DECIDED}")
        buttons.first.click()
        settled(page)
        assert REASON in page.inner_text(".tool[data-call=h1] [data-role=tool-result]")
        assert REASON in page.inner_text(f"{box(write_id)} [data-role=decision]")
        reply = page.locator("[data-role=message-assistant] .text").last.inner_text()
        assert reply.startswith(REPLY) and OPTIONS[0] in reply and REASON in reply
        assert not (chat.workspace / "x.html").exists()
        assert page.locator("main img, main script, main svg").count() == 0
        page.reload()  # the same conversation replayed from the stored stream
        settled(page)
        page.wait_for_selector(f"{box(choice_id)}{DECIDED}")
        assert page.locator("main img, main script, main svg").count() == 0
        assert page.inner_text("[data-role=message-user] .text") == PROMPT
        page.wait_for_timeout(300)  # let any injected handler fire, were there one
        assert dialogs == []
        page.goto(f"{chat.server.base}/chat")
        page.wait_for_selector(f'[data-task="{task_id}"]')
        assert page.inner_text(f'[data-task="{task_id}"] a') == PROMPT
        assert page.locator("main img, main script").count() == 0
        browser.close()
    assert dialogs == []

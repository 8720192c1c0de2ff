"""The web chat in real headless Chromium against a real ``signoff serve --agent`` process.

The server hosts the scripted demo chat agent (``signoff.chat.hosted:agent``) with its file
tools in a temporary workspace, so "the tool ran" is a file on disk.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import httpx
import pytest

from signoff.server.app import API
from tests.serving import DEMO, bearer
from tests.web.browser import CHROMIUM, CHROMIUM_ARGS, SCREENSHOTS
from tests.web.chat_serving import (
    DECIDED,
    Chat,
    box,
    follow_up,
    serve_chat,
    settled,
    signed_in,
    start,
    waiting_ids,
)

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page


@pytest.fixture(scope="module")
def chat(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chat]:
    """One server for the module, hosting the demo agent."""
    yield from serve_chat(tmp_path_factory.mktemp("chat"), DEMO)


@pytest.fixture(scope="module")
def browser(chat: Chat) -> Iterator[Browser]:
    """One Chromium for the module; each test gets its own contexts (cookies)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def alice(browser: Browser, chat: Chat) -> Iterator[Page]:
    """A page signed in as alice; fails the test on any script error or dialog."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = signed_in(context, chat, "alice")
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    yield page
    context.close()
    assert errors == [], errors


def test_approve_edit_and_reject_inline(alice: Page, chat: Chat) -> None:
    """Approve runs the tool once and the reply streams after it; Edit runs the edited args;
    Reject with a reason runs nothing and the reason is the call's result; Shift+Enter is a
    new line and Enter sends."""
    page = alice
    page.goto(f"{chat.server.base}/chat")
    page.fill("[data-role=message]", "create notes.md saying hello")
    page.press("[data-role=message]", "Shift+Enter")
    page.keyboard.type("world")
    assert page.url.endswith("/chat")
    assert page.input_value("[data-role=message]") == "create notes.md saying hello\nworld"
    task_id = start(page, chat, None)
    (request_id,) = waiting_ids(chat, "alice", task_id, 1)
    page.wait_for_selector(f"{box(request_id)} [data-action=approve]")
    assert page.inner_text("[data-role=message-user]").endswith(
        "create notes.md saying hello\nworld"
    )
    assert page.text_content("[data-role=task-status]") == "Paused: waiting for you"
    assert '"path": "notes.md"' in page.inner_text(".tool [data-role=tool-args]")
    assert page.locator(f"{box(request_id)} [data-action=approve-session]").count() == 1
    assert not (chat.workspace / "notes.md").exists()
    # count the text changes the reply makes: token by token, not all at once
    page.evaluate(
        """() => { window.textChanges = 0;
        new MutationObserver((m) => { window.textChanges += m.length; })
          .observe(document.querySelector('[data-role=transcript]'),
                   { characterData: true, subtree: true }); }"""
    )
    page.click(f"{box(request_id)} [data-action=approve]")
    settled(page)
    page.wait_for_selector(f"{box(request_id)}{DECIDED} [data-role=decision]")
    assert "approved by alice" in page.inner_text(f"{box(request_id)} [data-role=decision]")
    assert (chat.workspace / "notes.md").read_text() == "hello\nworld\n"
    assert page.locator("[data-role=tool-result]").count() == 1
    assert "wrote" in page.inner_text("[data-role=tool-result]")
    assert (
        "Here is what happened" in page.locator("[data-role=message-assistant]").last.inner_text()
    )
    assert page.evaluate("window.textChanges") > 3

    follow_up(page, "create edited.md saying proposed")
    (edit_id,) = waiting_ids(chat, "alice", task_id, 1)
    page.click(f"{box(edit_id)} [data-action=edit]")
    page.click(f"{box(edit_id)} [data-action=raw-json]")
    editor = f"{box(edit_id)} [data-role=args-editor]"
    page.fill(editor, "{not json")
    page.click(f"{box(edit_id)} [data-action=review-edit]")
    assert "not valid JSON" in page.inner_text(f"{box(edit_id)} [data-role=json-error]")
    page.fill(editor, '{"path": "edited.md", "content": "what alice wrote\\n"}')
    page.click(f"{box(edit_id)} [data-action=review-edit]")
    page.click(f"{box(edit_id)} [data-action=approve-edited]")
    page.wait_for_selector(f"{box(edit_id)}{DECIDED}")
    settled(page)
    assert (chat.workspace / "edited.md").read_text() == "what alice wrote\n"
    assert "what alice wrote" in (page.text_content(box(edit_id)) or "")

    follow_up(page, "create nope.md saying no")
    (reject_id,) = waiting_ids(chat, "alice", task_id, 1)
    page.fill(f"{box(reject_id)} [data-role=reason]", "not in this repo")
    page.click(f"{box(reject_id)} [data-action=reject]")
    settled(page)
    assert not (chat.workspace / "nope.md").exists()
    result = page.inner_text(f".tool:has({box(reject_id)}) [data-role=tool-result]")
    assert "not in this repo" in result
    assert "rejected by alice" in page.inner_text(f"{box(reject_id)} [data-role=decision]")
    assert "not in this repo" in page.locator("[data-role=message-assistant]").last.inner_text()


def test_parallel_calls_and_a_choice(alice: Page, chat: Chat) -> None:
    """Two gated calls and a choice in one turn: three boxes, decided in any order (one by the
    keyboard); the run goes on only once all are; the choice's buttons are its options, a
    forged option is refused and the box stays, a click sends exactly its option. Screenshots
    of waiting, decided and choice boxes at 1280 and 390 px."""
    page = alice
    task_id = start(
        page, chat, "create a.md saying x and create b.md saying y and ask me which database to use"
    )
    a_id, b_id, choice_id = waiting_ids(chat, "alice", task_id, 3)
    page.wait_for_selector(f"{box(choice_id)} [data-action=choose]")
    options = page.locator(f"{box(choice_id)} button[data-action=choose]").all_inner_texts()
    assert options == ["Choose PostgreSQL", "Choose SQLite", "Choose MySQL"]

    page.click(f"{box(b_id)} [data-action=approve]")
    page.wait_for_selector(f"{box(b_id)}{DECIDED}")
    assert chat.task("alice", task_id)["status"] == "Paused"
    assert not (chat.workspace / "b.md").exists()

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "chat-desktop.png"), full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    page.screenshot(path=str(SCREENSHOTS / "chat-phone.png"), full_page=True)
    page.set_viewport_size({"width": 1280, "height": 900})

    with chat.api("alice") as client:
        forged = client.post(
            f"/requests/{choice_id}/decision", json={"type": "choose", "choice": "Oracle"}
        )
    assert forged.status_code == 422, forged.text
    assert page.locator(f"{box(choice_id)} [data-action=choose]").count() == 3

    page.click(f'{box(choice_id)} [data-option="SQLite"]')
    page.wait_for_selector(f"{box(choice_id)}{DECIDED}")
    with chat.api("alice") as client:
        decided = client.get(f"/requests/{choice_id}").json()
    assert decided["decision"]["decision"]["choice"] == "SQLite"

    # the keyboard: the only box still waiting has the focus; `a` approves it
    page.wait_for_selector(f"{box(a_id)}.focused")
    page.keyboard.press("a")
    settled(page)
    assert (chat.workspace / "a.md").read_text() == "x\n"
    assert (chat.workspace / "b.md").read_text() == "y\n"
    assert "SQLite" in page.locator("[data-role=message-assistant]").last.inner_text()

    page.goto(f"{chat.server.base}/chat")
    page.set_viewport_size({"width": 390, "height": 844})
    page.wait_for_selector(f'[data-task="{task_id}"] [data-role=status]:text-is("Completed")')
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_decided_elsewhere_reload_and_restart(browser: Browser, alice: Page, chat: Chat) -> None:
    """A box follows a decision made in the inbox within a second; after a reload, and after
    kill -9 of the server and a restart, the waiting box is back and deciding it completes
    the run."""
    page = alice
    task_id = start(page, chat, "create inbox.md saying from the inbox")
    (first,) = waiting_ids(chat, "alice", task_id, 1)
    page.wait_for_selector(f"{box(first)} [data-action=approve]")
    inbox = page.context.new_page()
    inbox.goto(f"{chat.server.base}/")
    inbox.click(f'article.card[data-id="{first}"] [data-action=approve]')
    inbox.wait_for_selector(f'article.card[data-id="{first}"]', state="detached")
    page.wait_for_selector(f"{box(first)}{DECIDED}", timeout=1000)
    settled(page)
    assert (chat.workspace / "inbox.md").read_text() == "from the inbox\n"
    inbox.close()

    follow_up(page, "create reload.md saying again")
    (second,) = waiting_ids(chat, "alice", task_id, 1)
    page.wait_for_selector(f"{box(second)} [data-action=approve]")
    page.reload()
    page.wait_for_selector(f"{box(second)} [data-action=approve]")
    assert page.locator(f"{box(first)}{DECIDED}").count() == 1
    page.click(f"{box(second)} [data-action=approve]")
    settled(page)
    assert (chat.workspace / "reload.md").read_text() == "again\n"

    follow_up(page, "create crash.md saying survived")
    (third,) = waiting_ids(chat, "alice", task_id, 1)
    page.wait_for_selector(f"{box(third)} [data-action=approve]")
    chat.crash_and_restart()
    # the open page reconnects by itself; a fresh browser sees the same conversation too
    other = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        again = signed_in(other, chat, "alice")
        again.goto(f"{chat.server.base}/chat/{task_id}")
        again.wait_for_selector(f"{box(third)} [data-action=approve]")
        assert again.locator(".box article.card").count() == 3
        page.wait_for_selector("#live[data-state=live]", timeout=20_000)
        page.click(f"{box(third)} [data-action=approve]")
        settled(page)
        settled(again)
        assert again.locator(f"{box(third)}{DECIDED}").count() == 1
    finally:
        other.close()
    assert (chat.workspace / "crash.md").read_text() == "survived\n"


def test_who_may_open_a_conversation(browser: Browser, alice: Page, chat: Chat) -> None:
    """Only people open /chat (an agent token is refused as by the inbox); another person
    gets 404 for alice's conversation and does not list it."""
    task_id = start(alice, chat, "create private.md saying mine")
    with httpx.Client(base_url=chat.server.base, headers=bearer(chat.tokens["bot"])) as agent:
        page = agent.get("/chat", follow_redirects=False)
        assert page.status_code == 303 and page.headers["location"] == "/login?next=/chat"
        assert agent.get(f"{API}/tasks/{task_id}/stream").status_code == 403
    assert httpx.get(f"{chat.server.base}/login?token={chat.tokens['bot']}").status_code == 403
    context = browser.new_context()
    try:
        bob = signed_in(context, chat, "bob")
        answer = bob.goto(f"{chat.server.base}/chat/{task_id}")
        assert answer is not None and answer.status == 404
        bob.wait_for_selector("[data-role=not-found]")
        assert "mine" not in bob.inner_text("main")
        bob.goto(f"{chat.server.base}/chat")
        bob.wait_for_selector("[data-role=empty]:not([hidden])")
        assert bob.locator(f'[data-task="{task_id}"]').count() == 0
    finally:
        context.close()

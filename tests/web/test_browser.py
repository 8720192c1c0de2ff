"""The web inbox in real headless Chromium against a real ``signoff serve`` process."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.serving import Server, agent_token, free_port, start_server
from tests.web.browser import (
    SCREENSHOTS,
    Agent,
    launched_chromium,
    sign_in,
)

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Dialog, Page

XSS = "<img src=x onerror=alert(1)>"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One Chromium for the module; each test gets its own context (cookies)."""
    yield from launched_chromium()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """A fresh server whose diff previews may read the test's own tmp_path (--preview-root)."""
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path), "COLUMNS": "200"}
    db = f"sqlite:///{tmp_path / 'serve.db'}"
    running = start_server(db, free_port(), env, "--preview-root", str(tmp_path))
    yield running
    if running.process.poll() is None:
        running.stop()


@pytest.fixture
def agent(server: Server) -> Iterator[Agent]:
    """An agent with its own token on the test's server."""
    client = Agent(server, agent_token(server))
    yield client
    client.close()


@pytest.fixture
def page(browser: Browser, server: Server) -> Iterator[Page]:
    """A page signed in to the inbox through the login link ``serve`` printed."""
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda e: errors.append(str(e)))
    assert server.admin_token is not None
    sign_in(tab, server.base, server.admin_token)
    yield tab
    context.close()
    assert errors == [], errors


def card(page: Page, request_id: str) -> str:
    """The selector of one request's card."""
    return f'article.card[data-id="{request_id}"]'


def test_agent_waits_while_a_click_in_the_inbox_approves(
    page: Page, agent: Agent, server: Server
) -> None:
    """The request appears without reload, one click approves, the waiting agent returns."""
    assert page.inner_text("#pending-count") == "0"
    created = agent.submit(tool_name="shell", tool_args={"command": "make deploy"}, expires_in=600)
    waited = agent.wait_in_background(created["id"])
    selector = card(page, created["id"])
    page.wait_for_selector(selector)
    page.wait_for_function("document.getElementById('pending-count').textContent === '1'")
    assert '"command": "make deploy"' in page.inner_text(f"{selector} [data-role=args]")
    assert re.match(r"expires in \d+:\d\d", page.inner_text(f"{selector} .countdown"))
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "inbox.png"), full_page=True)
    page.click(f"{selector} [data-action=approve]")
    answer = waited()
    assert answer["status"] == "approved" and answer["decision"]["decided_by"] == "admin"
    page.wait_for_selector(selector, state="detached")
    assert page.inner_text("#pending-count") == "0"


def test_agent_supplied_markup_stays_inert(page: Page, agent: Agent) -> None:
    """Tool name, args and context with HTML show as text; no script runs, no dialog opens."""
    dialogs: list[str] = []

    def on_dialog(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    created = agent.submit(
        tool_name="<script>alert(2)</script>",
        tool_args={"command": XSS},
        context=f'<b onmouseover="alert(3)">{XSS}</b>',
    )
    selector = card(page, created["id"])
    page.wait_for_selector(selector)
    assert XSS in page.inner_text(f"{selector} [data-role=args]")
    assert page.inner_text(f"{selector} .title") == "<script>alert(2)</script>"
    assert page.locator(f"{selector} img, {selector} script, {selector} b").count() == 0
    page.hover(f"{selector} .context")
    page.goto(f"{page.url.rstrip('/')}/requests/{created['id']}")
    page.wait_for_selector(f"{selector} [data-role=args]")
    page.wait_for_selector("[data-role=audit] tr")
    assert page.locator("main img, main script").count() == 0
    page.wait_for_timeout(300)  # let any injected handler fire, were there one
    assert dialogs == []


def test_batch_approve_and_reject_selected_then_approve_all(page: Page, agent: Agent) -> None:
    """Selected requests are decided together; "approve all", once confirmed, takes the rest."""
    ids = [agent.submit(tool_name="t", tool_args={"n": n})["id"] for n in range(5)]
    for request_id in ids:
        page.wait_for_selector(card(page, request_id))
    page.check(f"{card(page, ids[0])} input.select")
    page.check(f"{card(page, ids[1])} input.select")
    assert page.inner_text("[data-role=selected-count]") == "2 selected"
    page.click("[data-action=approve-selected]")
    page.wait_for_selector(card(page, ids[0]), state="detached")
    page.wait_for_selector(card(page, ids[1]), state="detached")
    page.check(f"{card(page, ids[2])} input.select")
    page.fill("[data-role=batch-reason]", "duplicate job")
    page.click("[data-action=reject-selected]")
    page.wait_for_selector(card(page, ids[2]), state="detached")
    statuses = [agent.get(i)["status"] for i in ids]
    assert statuses == ["approved", "approved", "rejected", "pending", "pending"]
    assert agent.get(ids[2])["decision"]["decision"]["reason"] == "duplicate job"
    page.click("[data-action=approve-all]")
    assert agent.get(ids[3])["status"] == "pending"  # nothing happens before the confirmation
    page.click("[data-action=confirm-approve-all]")
    page.wait_for_selector("[data-role=empty]:not([hidden])")
    assert [agent.get(i)["status"] for i in ids[3:]] == ["approved", "approved"]
    assert page.inner_text("#pending-count") == "0"


def test_file_edit_shows_a_diff_with_line_numbers(page: Page, agent: Agent, tmp_path: Path) -> None:
    """A write_file call shows removed lines red and added lines green, numbered."""
    target = tmp_path / "config.py"
    target.write_text("DEBUG = False\nPORT = 80\nNAME = 'x'\n")
    created = agent.submit(
        tool_name="write_file",
        tool_args={"path": str(target), "content": "DEBUG = True\nPORT = 80\nNAME = 'x'\n"},
    )
    selector = card(page, created["id"])
    page.wait_for_selector(f"{selector} table.diff")
    removed = page.locator(f"{selector} table.diff tr.del")
    added = page.locator(f"{selector} table.diff tr.add")
    assert removed.count() == 1 and added.count() == 1
    assert removed.locator("td.code").inner_text() == "DEBUG = False"
    assert added.locator("td.code").inner_text() == "DEBUG = True"
    assert removed.locator("td.ln").first.inner_text() == "1"
    red = removed.evaluate("el => getComputedStyle(el).backgroundColor")
    green = added.evaluate("el => getComputedStyle(el).backgroundColor")
    assert red != green and "rgba(0, 0, 0, 0)" not in (red, green)


def test_a_preview_the_server_did_not_read_says_the_old_text_is_the_agents(
    page: Page, agent: Agent
) -> None:
    """A replace edit outside the preview root: the card says whose old text it shows."""
    created = agent.submit(
        tool_name="edit_file",
        tool_args={"path": "/etc/passwd", "old_string": "root", "new_string": "toor"},
    )
    selector = card(page, created["id"])
    page.wait_for_selector(f"{selector} table.diff")
    text = page.inner_text(selector)
    assert "old text supplied by the agent, not read from the file" in text.lower()
    assert "outside the preview root" in text and "root:x:0:0" not in text
    assert page.locator(f"{selector} table.diff tr.del td.code").inner_text() == "root"


def test_edited_args_are_validated_and_diffed_before_approval(page: Page, agent: Agent) -> None:
    """Bad JSON is refused in the page; a valid edit shows its diff, then runs as edited."""
    created = agent.submit(tool_name="shell", tool_args={"command": "rm -rf /tmp/build"})
    waited = agent.wait_in_background(created["id"])
    selector = card(page, created["id"])
    page.click(f"{selector} [data-action=edit]")
    page.click(f"{selector} [data-action=raw-json]")
    editor = f"{selector} [data-role=args-editor]"
    page.fill(editor, '{"command": ')
    page.click(f"{selector} [data-action=review-edit]")
    assert "not valid JSON" in page.inner_text(f"{selector} [data-role=json-error]")
    page.fill(editor, '["not", "an", "object"]')
    page.click(f"{selector} [data-action=review-edit]")
    assert "must be a JSON object" in page.inner_text(f"{selector} [data-role=json-error]")
    assert agent.get(created["id"])["status"] == "pending"
    page.fill(editor, '{"command": "rm -rf /tmp/build/cache"}')
    page.click(f"{selector} [data-action=review-edit]")
    review = f"{selector} [data-role=edit-review]"
    assert 'rm -rf /tmp/build"' in page.inner_text(f"{review} tr.del")
    assert "rm -rf /tmp/build/cache" in page.inner_text(f"{review} tr.add")
    page.click(f"{review} [data-action=approve-edited]")
    answer = waited()
    assert answer["status"] == "approved"
    assert answer["approved_args"] == {"command": "rm -rf /tmp/build/cache"}


def test_choice_and_questions_are_answered_from_their_controls(page: Page, agent: Agent) -> None:
    """Option buttons, multi-select checkboxes with free text, and question fields decide."""
    single = agent.submit(kind="choice", prompt="Which env?", options=["staging", "prod"])
    multi = agent.submit(
        kind="choice",
        prompt="Regions?",
        options=["eu", "us", "ap"],
        multi_select=True,
        allow_other=True,
    )
    asked = agent.submit(
        kind="questions",
        questions=[{"id": "version", "text": "Which version?", "required": True}, "Notes?"],
    )
    page.click(f'{card(page, single["id"])} [data-option="prod"]')
    page.check(f'{card(page, multi["id"])} input[value="eu"]')
    page.fill(f"{card(page, multi['id'])} [data-role=other]", "sa-east")
    page.click(f"{card(page, multi['id'])} [data-action=choose]")
    questions = card(page, asked["id"])
    page.click(f"{questions} [data-action=answer]")  # the required answer is missing
    page.wait_for_selector(f"{questions} [data-role=error]:has-text('version')")
    page.fill(f'{questions} [data-question="version"]', "2.4.1")
    page.fill(f"{questions} [data-role=answer-feedback]", "ship it after 5pm")
    page.click(f"{questions} [data-action=answer]")
    page.wait_for_selector(questions, state="detached")
    one, many, answered = (agent.get(r["id"]) for r in (single, multi, asked))
    assert one["decision"]["decision"]["choice"] == "prod"
    assert many["decision"]["extra"]["choices"] == ["eu", "sa-east"]
    assert answered["decision"]["decision"]["answers"] == {"version": "2.4.1"}
    assert answered["decision"]["decision"]["feedback"] == "ship it after 5pm"


def test_keyboard_moves_approves_and_rejects(page: Page, agent: Agent) -> None:
    """j/k move between requests, a approves, r then Enter rejects with a reason, ? helps."""
    older = agent.submit(tool_name="first", tool_args={})
    newer = agent.submit(tool_name="second", tool_args={})
    page.wait_for_selector(card(page, older["id"]))
    page.wait_for_selector(card(page, newer["id"]))
    page.keyboard.press("?")
    assert page.is_visible("#help")
    page.keyboard.press("Escape")
    assert not page.is_visible("#help")
    page.keyboard.press("j")  # the newest first
    page.keyboard.press("j")
    page.keyboard.press("k")
    assert page.get_attribute(f"{card(page, newer['id'])}", "class") == "card focused"
    page.keyboard.press("a")
    page.wait_for_selector(card(page, newer["id"]), state="detached")
    page.keyboard.press("r")
    page.keyboard.type("not today")
    page.keyboard.press("Enter")
    page.wait_for_selector(card(page, older["id"]), state="detached")
    assert agent.get(newer["id"])["status"] == "approved"
    rejected = agent.get(older["id"])
    assert rejected["status"] == "rejected"
    assert rejected["decision"]["decision"]["reason"] == "not today"


def test_history_audit_and_grant_revocation(page: Page, agent: Agent, server: Server) -> None:
    """A decided call is in history with its decider and audit trail; its grant can be revoked."""
    created = agent.submit(tool_name="deploy", tool_args={"env": "staging"})
    selector = card(page, created["id"])
    page.select_option(f"{selector} [data-role=scope]", "always")
    page.click(f"{selector} [data-action=approve]")
    page.wait_for_selector(selector, state="detached")
    claimed = agent.http.post(
        f"/api/v1/requests/{created['id']}/claim", json={"args": {"env": "staging"}}
    )
    assert claimed.status_code == 200
    agent.http.post(f"/api/v1/requests/{created['id']}/result", json={"ok": True, "result": "done"})
    page.click("[data-nav=history]")
    row = f'[data-role=history] tr[data-id="{created["id"]}"]'
    page.wait_for_selector(f"{row}[data-status=completed]")
    assert "admin" in page.inner_text(row) and page.inner_text(f"{row} .result-cell") == "done"
    page.click(f"{row} a")
    page.wait_for_selector("[data-role=audit] tr >> nth=3")
    actions = page.locator("[data-role=audit] tr td:nth-child(4)").all_inner_texts()
    assert actions[:1] == ["submit"] and "claim" in actions and "complete" in actions
    assert "scope always" in page.inner_text("[data-role=decision]")
    page.click("[data-nav=grants]")
    grant_row = "[data-role=grants] tr"
    page.wait_for_selector(f"{grant_row} >> text=deploy")
    page.click(f"{grant_row} [data-action=revoke]")
    page.wait_for_selector("[data-role=grants] tr", state="detached")
    grants = agent.http.get("/api/v1/grants")
    assert grants.status_code == 403  # agents may not list them; ask as the admin instead
    listed = server.cli("grants", "list", "--all")
    assert "revoked" in listed.stdout


def test_inbox_reconnects_after_a_server_restart(page: Page, server: Server) -> None:
    """The page reconnects by itself and shows what arrived while the server was down."""
    port = server.port
    server.stop()
    page.wait_for_selector("#live[data-state=reconnecting]")
    made_offline = server.cli("submit", "--tool", "while-down", "--args", "{}")
    assert made_offline.returncode == 0, made_offline.stderr
    restarted = start_server(server.db, port, server.env)
    try:
        page.wait_for_selector("#live[data-state=live]", timeout=20_000)
        page.wait_for_selector("article.card .title:text-is('while-down')")
        live_again = Agent(restarted, agent_token(restarted, "bot2"))
        try:
            created = live_again.submit(tool_name="after-restart", tool_args={})
            page.wait_for_selector(card(page, created["id"]))
        finally:
            live_again.close()
        page.wait_for_function("document.getElementById('pending-count').textContent === '2'")
    finally:
        restarted.stop()


def test_a_call_that_is_not_editable_offers_no_edit(page: Page, agent: Agent) -> None:
    """editable=false: the card has Approve and Reject but no Edit args and no editor."""
    fixed = agent.submit(tool_name="shell", tool_args={"command": "make"}, editable=False)
    free = agent.submit(tool_name="shell", tool_args={"command": "make test"})
    page.wait_for_selector(f"{card(page, fixed['id'])} [data-action=approve]")
    page.wait_for_selector(f"{card(page, free['id'])} [data-action=edit]")
    assert page.locator(f"{card(page, fixed['id'])} [data-action=edit]").count() == 0
    assert page.locator(f"{card(page, fixed['id'])} [data-role=args-editor]").count() == 0
    assert page.locator(f"{card(page, fixed['id'])} [data-action=reject]").count() == 1
    waited = agent.wait_in_background(fixed["id"])
    page.click(f"{card(page, fixed['id'])} [data-action=approve]")
    answer = waited()
    assert answer["status"] == "approved" and answer["approved_args"] == {"command": "make"}


def test_a_call_whose_claimant_went_silent_shows_failed_by_its_lease(
    page: Page, agent: Agent
) -> None:
    """An executing call shows its claim's lease; past it, the server's failure shows live."""
    created = agent.submit(tool_name="deploy", tool_args={"env": "prod"})
    selector = card(page, created["id"])
    page.click(f"{selector} [data-action=approve]")
    page.wait_for_selector(selector, state="detached")
    held = agent.http.post(
        f"/api/v1/requests/{created['id']}/claim", json={"args": {"env": "prod"}, "lease": 3}
    )
    assert held.status_code == 200, held.text
    page.goto(f"{page.url.rstrip('/')}/requests/{created['id']}")
    claim = page.wait_for_selector("[data-role=claim]")
    assert claim is not None and "claimed by bot" in claim.inner_text()
    assert "lease until" in claim.inner_text()
    # the claimant never reports nor renews: the server fails the call, and the page shows it
    page.wait_for_selector("[data-role=result].failed", timeout=15_000)
    assert "did not report within its lease" in page.inner_text("[data-role=result]")
    assert "lease until" not in page.inner_text("[data-role=claim]")

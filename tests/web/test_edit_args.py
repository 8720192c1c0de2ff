"""Editing a tool call's arguments field by field in real Chromium, against a real server.

The person edits a write_file's content and sees the server's diff for their text (not the
agent's) before approving "Approve edited call"; numbers, booleans and enums get typed fields
from the tool's schema (or from the values without one), nested values raw JSON; agent text in
argument names and values stays inert.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.serving import Server, agent_token, free_port, start_server
from tests.web.browser import CHROMIUM, CHROMIUM_ARGS, SCREENSHOTS, Agent, need_chromium, sign_in

if TYPE_CHECKING:
    from playwright.sync_api import Dialog, Page, Route

XSS = "<img src=x onerror=alert(1)>"
RLO = "\u202e"


@dataclass
class Setup:
    """The server, an agent on it, its preview root, and one signed-in page."""

    server: Server
    agent: Agent
    root: Path
    page: Page
    dialogs: list[str]
    errors: list[str]


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    """One server (preview root with notes.md), one Chromium page signed in as the admin."""
    need_chromium()
    from playwright.sync_api import sync_playwright

    base = tmp_path_factory.mktemp("edit_args")
    root = base / "root"
    root.mkdir()
    (root / "notes.md").write_text("first line\nsecond line\n")
    env = {**os.environ, "XDG_CONFIG_HOME": str(base), "COLUMNS": "200"}
    server = start_server(
        f"sqlite:///{base / 'serve.db'}", free_port(), env, "--preview-root", str(root)
    )
    agent = Agent(server, agent_token(server))
    dialogs: list[str] = []
    errors: list[str] = []

    def on_dialog(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_context(viewport={"width": 1200, "height": 900}).new_page()
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("dialog", on_dialog)
            assert server.admin_token is not None
            sign_in(page, server.base, server.admin_token)
            yield Setup(server, agent, root, page, dialogs, errors)
            browser.close()
    finally:
        agent.close()
        server.stop()
    assert errors == [] and dialogs == [], (errors, dialogs)


def _card(request_id: str) -> str:
    return f'article.card[data-id="{request_id}"]'


def _field(card: str, name: str) -> str:
    return f'{card} [data-arg="{name}"]'


def _edit_in_inbox(setup: Setup, tool: str, args: dict[str, Any], **extra: Any) -> str:
    """File a call and open its editor in the inbox; its id."""
    setup.page.goto(f"{setup.server.base}/")
    created = setup.agent.submit(tool_name=tool, tool_args=args, **extra)
    setup.page.click(f"{_card(created['id'])} [data-action=edit]")
    request_id: str = created["id"]
    return request_id


def _wait_until_shown(page: Page, card: str) -> None:
    """Wait until Approve edited call is enabled and the preview for what the fields hold is on
    screen."""
    page.wait_for_selector(f"{card} [data-action=approve-edited]:enabled")
    page.wait_for_function(
        f"""!document.querySelector('{card} [data-role=edit-review]').hasAttribute('aria-busy')"""
    )


def _approve_when_shown(page: Page, card: str) -> None:
    """Click Approve edited call once the preview for what the fields hold is on screen."""
    _wait_until_shown(page, card)
    page.click(f"{card} [data-action=approve-edited]")


def test_the_diff_shown_is_for_the_edited_content_then_the_agent_gets_it(setup: Setup) -> None:
    """On the request's page: edit content, the diff changes to it, approve, the agent's wait
    returns the edited args."""
    page = setup.page
    created = setup.agent.submit(
        tool_name="write_file", tool_args={"path": "notes.md", "content": "first line\nagent\n"}
    )
    waited = setup.agent.wait_in_background(created["id"])
    page.goto(f"{setup.server.base}/requests/{created['id']}")
    card = _card(created["id"])
    page.wait_for_selector(f"{card} [data-role=preview] table.diff")
    assert "agent" in page.inner_text(f"{card} [data-role=preview] tr.add")
    page.click(f"{card} [data-action=edit]")
    content = _field(card, "content")
    assert page.get_attribute(content, "data-kind") == "text"
    assert page.evaluate(f"document.querySelector('{content}').tagName") == "TEXTAREA"
    page.fill(content, "first line\nperson one\nperson two\n")
    edited = f"{card} [data-role=edited-preview]"
    page.wait_for_selector(f"{edited} tr.add >> text=person two")
    added = page.locator(f"{edited} tr.add td.code").all_inner_texts()
    assert added == ["person one", "person two"], added
    assert page.locator(f"{edited} tr.del td.code").all_inner_texts() == ["second line"]
    assert page.is_hidden(f"{card} [data-role=preview]")  # the agent's diff is replaced
    notice = page.inner_text(f"{card} [data-role=edited-notice]")
    assert notice == "You are approving these edited arguments, not what the agent asked"
    assert "agent" in (page.text_content(f"{card} [data-role=original-preview]") or "")
    button = f"{card} [data-action=approve-edited]"
    assert page.inner_text(button) == "Approve edited call"
    assert "null" not in page.inner_text(f"{card} [data-role=edit-review]")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "edit-args.png"), full_page=True)
    page.click(button)
    answer = waited()
    assert answer["status"] == "approved"
    assert answer["approved_args"] == {
        "path": "notes.md",
        "content": "first line\nperson one\nperson two\n",
    }
    assert (setup.root / "notes.md").read_text() == "first line\nsecond line\n"


SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "content": {"type": "string"},
        "mode": {"type": "integer", "minimum": 0},
        "backup": {"type": "boolean"},
        "level": {"enum": ["low", "high"]},
        "options": {"type": "object"},
    },
    "required": ["path", "content"],
}


def test_typed_fields_from_the_schema_with_its_errors_beside_them(setup: Setup) -> None:
    """In the inbox: integer, boolean, enum and object fields; a misfit is shown beside its
    field and blocks approving; the typed values are what the agent gets."""
    page = setup.page
    args = {
        "path": "notes.md",
        "content": "x\n",
        "mode": 1,
        "backup": False,
        "level": "low",
        "options": {"a": 1},
    }
    request_id = _edit_in_inbox(setup, "write_file", args, args_schema=SCHEMA)
    waited = setup.agent.wait_in_background(request_id)
    card = _card(request_id)
    kinds = {n: page.get_attribute(_field(card, n), "data-kind") for n in args}
    assert kinds == {
        "path": "text",
        "content": "text",
        "mode": "integer",
        "backup": "boolean",
        "level": "enum",
        "options": "json",
    }
    page.fill(_field(card, "mode"), "-1")
    mode_error = f"{card} .arg-field[data-kind=integer] [data-role=field-error]"
    page.wait_for_selector(f"{mode_error} >> text=minimum")
    assert page.is_disabled(f"{card} [data-action=approve-edited]")
    page.fill(_field(card, "mode"), "7")
    page.check(_field(card, "backup"))
    page.select_option(_field(card, "level"), label="high")
    page.fill(_field(card, "options"), '{"a": 2, "b": [true]}')
    _wait_until_shown(page, card)
    # read before approving: a decided card leaves the inbox
    assert page.inner_text(mode_error) == ""
    page.click(f"{card} [data-action=approve-edited]")
    answer = waited()
    assert answer["approved_args"] == {
        **args,
        "mode": 7,
        "backup": True,
        "level": "high",
        "options": {"a": 2, "b": [True]},
    }


def test_a_preview_answered_after_a_later_edit_is_never_shown_to_approve(setup: Setup) -> None:
    """The preview for count 4 is held back until the person has typed count 5: when it
    comes, it is not shown and nothing can be approved until the preview for 5 is on
    screen; what the agent gets is 5 (CI once saw the stale preview approved)."""
    page = setup.page
    request_id = _edit_in_inbox(setup, "deploy", {"count": 3})
    waited = setup.agent.wait_in_background(request_id)
    card = _card(request_id)
    held: list[Route] = []
    page.route("**/preview", lambda route: held.append(route))  # each answered by hand

    def asked(n: int) -> None:
        for _ in range(200):  # the debounced preview is asked for, and held
            if len(held) >= n:
                return
            page.wait_for_timeout(50)
        raise AssertionError(f"preview {n} was never asked for")

    review = f"{card} [data-role=edit-review]"
    page.fill(_field(card, "count"), "4")
    asked(1)
    page.fill(_field(card, "count"), "5")
    with page.expect_response("**/preview"):
        held[0].continue_()  # the answer for 4 arrives after the edit to 5
    page.wait_for_timeout(200)
    assert page.locator(f"{card} [data-action=approve-edited]:enabled").count() == 0
    assert page.get_attribute(review, "aria-busy") == "true"
    assert '"count": 4' not in page.inner_text(review)
    asked(2)
    held[1].continue_()  # the answer for 5
    _wait_until_shown(page, card)
    shown = page.inner_text(review)
    assert '"count": 5' in shown and '"count": 4' not in shown
    page.click(f"{card} [data-action=approve-edited]")
    page.unroute("**/preview")
    assert waited()["approved_args"] == {"count": 5}


def test_without_a_schema_fields_follow_the_values_and_raw_json_edits_the_whole(
    setup: Setup,
) -> None:
    """No schema: number, boolean, string and list fields from the values; Raw JSON edits the
    whole args and Fields rebuilds from it; what is approved is the raw edit."""
    page = setup.page
    args = {"count": 3, "ratio": 0.5, "dry_run": True, "name": "x", "items": [1, 2]}
    request_id = _edit_in_inbox(setup, "deploy", args)
    waited = setup.agent.wait_in_background(request_id)
    card = _card(request_id)
    kinds = {n: page.get_attribute(_field(card, n), "data-kind") for n in args}
    assert kinds == {
        "count": "integer",
        "ratio": "number",
        "dry_run": "boolean",
        "name": "text",
        "items": "json",
    }
    assert page.get_attribute(_field(card, "count"), "type") == "number"
    assert page.is_checked(_field(card, "dry_run"))
    page.fill(_field(card, "count"), "4")
    page.click(f"{card} [data-action=raw-json]")
    raw = f"{card} [data-role=args-editor]"
    assert '"count": 4' in page.input_value(raw)
    page.fill(raw, '{"count": 5, "dry_run": false, "name": "y", "items": [3], "extra": null}')
    page.click(f"{card} [data-action=raw-json]")  # back to fields, rebuilt from the JSON
    assert page.input_value(_field(card, "count")) == "5"
    assert not page.is_checked(_field(card, "dry_run"))
    assert page.get_attribute(_field(card, "extra"), "data-kind") == "json"
    _approve_when_shown(page, card)
    answer = waited()
    assert answer["approved_args"] == {
        "count": 5,
        "dry_run": False,
        "name": "y",
        "items": [3],
        "extra": None,
    }


def test_markup_in_argument_names_and_values_stays_text(setup: Setup) -> None:
    """A name or value holding HTML is a label and a field value, never markup; a value with
    a bidi override is edited as JSON with the escape shown."""
    page = setup.page
    args = {XSS: XSS, "note": f"abc{RLO}def", "path": "notes.md", "content": XSS}
    card = _card(_edit_in_inbox(setup, "write_file", args))
    assert XSS in page.locator(f"{card} .arg-name").all_inner_texts()
    assert page.locator(f"{card} .argsform img").count() == 0
    first = page.locator(f"{card} .arg-fields textarea").first
    assert first.input_value() == XSS
    note = _field(card, "note")
    assert page.get_attribute(note, "data-kind") == "json"
    assert "\\u202e" in page.input_value(note) and RLO not in page.input_value(note)
    page.fill(_field(card, "content"), f"{XSS}!\n")
    page.wait_for_selector(f"{card} [data-role=edited-preview] tr.add")
    assert page.inner_text(f"{card} [data-role=edited-preview] tr.add td.code") == f"{XSS}!"
    assert page.locator(f"{card} img").count() == 0 and setup.dialogs == []

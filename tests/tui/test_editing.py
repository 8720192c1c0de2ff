"""Editing a call's args field by field in ``signoff inbox`` (Textual's pilot, real SQLite).

The person changes a write_file's content in its own text area, Ctrl+S shows the diff made
again for their text (not the agent's) under the edited-call notice, and Enter approves what
they saw; typed fields come from the tool's schema, its misfits shown beside their fields.
"""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from textual.pilot import Pilot
from textual.widgets import Checkbox, Input, Select, Static, TextArea

from signoff.backends import LocalBackend
from signoff.bus.local import LocalBus
from signoff.domain.requests import ApprovalRequest, Request
from signoff.service import Service
from signoff.store.sqlite import SQLiteStore
from signoff.testing import ADMIN, AGENT
from signoff.tui.editing import NOTICE, ArgsFormScreen, ConfirmEditScreen
from signoff.tui.inbox import InboxApp

SIZE = (160, 60)
SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "content": {"type": "string"},
        "mode": {"type": "integer", "minimum": 0},
        "backup": {"type": "boolean"},
        "level": {"enum": ["low", "high"]},
    },
    "required": ["path", "content"],
}


@pytest.fixture
async def svc(tmp_path: Path) -> AsyncIterator[Service]:
    """A service on a fresh SQLite file whose previews read tmp_path only."""
    store = SQLiteStore(tmp_path / "x.db")
    await store.open()
    (tmp_path / "notes.md").write_text("first\nsecond\n")
    service = Service(store, bus=LocalBus(), read_file=lambda p: (tmp_path / p).read_text())
    yield service
    await service.stop_sweeper()
    await store.close()


async def _submit(svc: Service, args: dict[str, Any], **extra: Any) -> Request:
    body = {"session_id": "s", "kind": "approval", "tool_name": "write_file", "tool_args": args}
    return (await LocalBackend(svc, AGENT).submit({**body, **extra})).request


async def _until(pilot: Pilot[None], condition: Callable[[], bool], what: str) -> None:
    for _ in range(250):
        if condition():
            return
        await pilot.pause(0.02)
    raise AssertionError(f"never happened: {what}")


def _text(widget: Static) -> str:
    console = Console(record=True, width=200, file=io.StringIO())
    console.print(widget.content)
    return console.export_text()


def _widget(form: ArgsFormScreen, name: str) -> Any:
    return next(f.widget for f in form.fields if f.name == name)


async def _open_form(pilot: Pilot[None], app: InboxApp, request: Request) -> ArgsFormScreen:
    """Press e on ``request`` once it is listed; the form that opens."""
    await _until(pilot, lambda: app.visible_ids == [request.id], "the call is listed")
    await pilot.press("e")
    form = app.screen
    assert isinstance(form, ArgsFormScreen)
    return form


async def _confirm(pilot: Pilot[None], app: InboxApp) -> None:
    """Ctrl+S, then Enter on the confirm screen, until the approval is reported."""
    await pilot.press("ctrl+s")
    await _until(pilot, lambda: isinstance(app.screen, ConfirmEditScreen), "the review")
    await pilot.press("enter")
    await _until(pilot, lambda: "Approved with edits" in app.status_message, "the approval")


async def test_the_edited_content_s_diff_is_shown_before_it_is_approved(svc: Service) -> None:
    """Content edited in its own text area: the confirm screen's diff is for the person's text."""
    request = await _submit(svc, {"path": "notes.md", "content": "first\nagent\n"})
    person = LocalBackend(svc, ADMIN)
    app = InboxApp(person)
    async with app.run_test(size=SIZE) as pilot:
        form = await _open_form(pilot, app, request)
        assert [(f.name, f.kind) for f in form.fields] == [("path", "text"), ("content", "text")]
        content = _widget(form, "content")
        assert isinstance(content, TextArea) and content.text == "first\nagent\n"
        content.load_text("first\nperson\n")
        await pilot.press("ctrl+s")
        await _until(pilot, lambda: isinstance(app.screen, ConfirmEditScreen), "the review")
        shown = _text(app.screen.query_one("#edit-preview", Static))
        assert "+person" in shown and "-second" in shown and "+agent" not in shown
        notice = app.screen.query(".notice").first()
        assert isinstance(notice, Static) and NOTICE in _text(notice)
        await pilot.press("escape")  # back to editing, nothing decided
        assert app.screen is form
        assert (await person.get(request.id)).status == "pending"
        await _confirm(pilot, app)
    stored = await person.get(request.id)
    assert isinstance(stored, ApprovalRequest)
    assert stored.approved_args == {"path": "notes.md", "content": "first\nperson\n"}


async def test_typed_fields_from_the_schema_and_misfits_beside_them(svc: Service) -> None:
    """Integer input, checkbox and select from the schema; a misfit stays on the form beside
    its field; fixed, the typed values are what gets approved."""
    args = {"path": "notes.md", "content": "x\n", "mode": 1, "backup": False, "level": "low"}
    request = await _submit(svc, args, args_schema=SCHEMA)
    person = LocalBackend(svc, ADMIN)
    app = InboxApp(person)
    async with app.run_test(size=SIZE) as pilot:
        form = await _open_form(pilot, app, request)
        kinds = {f.name: f.kind for f in form.fields}
        assert kinds == {
            "path": "text",
            "content": "text",
            "mode": "integer",
            "backup": "boolean",
            "level": "enum",
        }
        mode, backup, level = (_widget(form, n) for n in ("mode", "backup", "level"))
        assert isinstance(mode, Input) and isinstance(backup, Checkbox)
        assert isinstance(level, Select)
        mode.value = "-1"
        await pilot.press("ctrl+s")
        await _until(pilot, lambda: "minimum" in form.field_error("mode"), "mode's misfit")
        assert app.screen is form
        mode.value = "abc"
        await pilot.press("ctrl+s")
        await _until(pilot, lambda: "not an integer" in form.field_error("mode"), "not a number")
        mode.value = "7"
        backup.value = True
        level.value = 1
        await _confirm(pilot, app)
    stored = await person.get(request.id)
    assert isinstance(stored, ApprovalRequest)
    assert stored.approved_args == {**args, "mode": 7, "backup": True, "level": "high"}

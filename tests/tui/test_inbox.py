"""The terminal inbox, driven by keys through Textual's pilot on a real SQLite service."""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest
import typer
from rich.console import Console, Group
from rich.text import Text
from textual.pilot import Pilot
from textual.widgets import Input, OptionList, Static, TextArea
from typer.testing import CliRunner

from signoff.backends import LocalBackend
from signoff.bus.local import LocalBus
from signoff.cli.inbox import register
from signoff.client import AsyncClient
from signoff.domain.decisions import QUICK_REASONS, REASON_REQUIRED, Decision
from signoff.domain.requests import ApprovalRequest, Request
from signoff.server.app import create_app
from signoff.service import Service, read_text_file
from signoff.store.sqlite import SQLiteStore
from signoff.testing import ADMIN, AGENT, APPROVER
from signoff.tui.editing import ConfirmEditScreen
from signoff.tui.inbox import (
    AnswerScreen,
    ChooseScreen,
    EditArgsScreen,
    HelpScreen,
    InboxApp,
    ReasonScreen,
)

SIZE = (160, 48)


@pytest.fixture
async def svc(tmp_path: Path) -> AsyncIterator[Service]:
    """A service on a fresh SQLite file, with file previews."""
    store = SQLiteStore(tmp_path / "x.db")
    await store.open()
    service = Service(store, bus=LocalBus(), read_file=read_text_file)
    yield service
    await service.stop_sweeper()
    await store.close()


@pytest.fixture
def agent(svc: Service) -> LocalBackend:
    """The agent that submits requests."""
    return LocalBackend(svc, AGENT)


@pytest.fixture
def person(svc: Service) -> LocalBackend:
    """The admin at the terminal."""
    return LocalBackend(svc, ADMIN)


async def call(agent: LocalBackend, tool: str = "shell", **args: Any) -> Request:
    """Submit an approval request for ``tool(**args)``."""
    body = {"session_id": "s1", "kind": "approval", "tool_name": tool, "tool_args": args}
    return (await agent.submit(body)).request


async def submit(agent: LocalBackend, **body: Any) -> Request:
    """Submit any request in session s1."""
    return (await agent.submit({"session_id": "s1", **body})).request


async def until(pilot: Pilot[None], condition: Callable[[], bool], what: str) -> None:
    """Let the app run until ``condition`` holds, or fail saying ``what`` never happened
    (within 15 s: a deadline, not a count of pauses, which a loaded machine stretches)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 15.0
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"never happened: {what}")
        await pilot.pause(0.02)


async def said(pilot: Pilot[None], app: InboxApp, text: str) -> None:
    """Wait until the status line reports ``text`` (the decision has come back)."""
    await until(pilot, lambda: text in app.status_message, f"the status line says {text!r}")


def detail_text(app: InboxApp) -> str:
    """The detail pane as plain text."""
    console = Console(record=True, width=200, file=io.StringIO())
    console.print(app.query_one("#detail", Static).content)
    return console.export_text()


async def status(person: LocalBackend, request: Request) -> Request:
    """The request as stored now."""
    return await person.get(request.id)


async def test_moving_with_j_k_and_arrows(agent: LocalBackend, person: LocalBackend) -> None:
    """The queue is newest first; j / down and k / up move the cursor; the detail follows."""
    first = await call(agent, command="one")
    second = await call(agent, command="two")
    third = await call(agent, command="three")
    app = InboxApp(person)
    async with app.run_test(size=SIZE) as pilot:
        assert app.visible_ids == [third.id, second.id, first.id]
        assert app.current is not None and app.current.id == third.id
        await pilot.press("j")
        assert app.current.id == second.id
        assert '"command": "two"' in detail_text(app)
        await pilot.press("down")
        assert app.current.id == first.id
        await pilot.press("k")
        assert app.current.id == second.id
        await pilot.press("up")
        assert app.current.id == third.id


async def test_detail_shows_args_diff_context_expiry_and_keeps_markup_literal(
    agent: LocalBackend, person: LocalBackend, tmp_path: Path
) -> None:
    """Args, a red/green diff, context and expiry show, and agent text is never markup."""
    target = tmp_path / "notes.txt"
    target.write_text("old line\nsame\n")
    request = (
        await agent.submit(
            {
                "session_id": "s1",
                "kind": "approval",
                "tool_name": "write_file",
                "tool_args": {"path": str(target), "content": "[bold]x[/bold]\nsame\n"},
                "context": {"why": "[red]tidy[/red]"},
                "expires_in": 600,
            }
        )
    ).request
    shell = await call(agent, command="[bold]x[/bold]")
    app = InboxApp(person)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("j")
        text = detail_text(app)
        assert "tool: write_file" in text
        assert "[bold]x[/bold]" in text
        assert "[red]tidy[/red]" in text
        assert "-old line" in text and "+[bold]x[/bold]" in text
        assert "expires" in text and "then reject" in text
        group = app.query_one("#detail", Static).content
        assert isinstance(group, Group)
        styles = {
            text.plain[span.start : span.end]: str(span.style)
            for text in group.renderables
            if isinstance(text, Text)
            for span in text.spans
        }
        assert styles["-old line\n"] == "red"
        assert styles["+[bold]x[/bold]\n"] == "green"
        row = app.query_one("#requests", OptionList).get_option(shell.id).prompt
        assert isinstance(row, Text) and '{"command": "[bold]x[/bold]"}' in row.plain
        assert app.current is not None and app.current.id == request.id


async def test_a_approves_and_the_request_leaves(agent: LocalBackend, person: LocalBackend) -> None:
    """a approves the highlighted request, which then leaves the queue."""
    request = await call(agent, command="ls")
    app = InboxApp(person)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("a")
        await said(pilot, app, "Approved shell ls")  # the notice names the call, not its id
        assert (await status(person, request)).status == "approved"
        assert app.visible_ids == []


async def test_r_rejects_with_the_reason_typed(agent: LocalBackend, person: LocalBackend) -> None:
    """r asks for a reason; Enter rejects with it."""
    request = await call(agent, command="rm -rf /")
    app = InboxApp(person)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("r")
        assert isinstance(app.screen, ReasonScreen)
        await pilot.press(*"too risky", "enter")
        await said(pilot, app, "Rejected shell rm -rf /")
        stored = await status(person, request)
        assert stored.status == "rejected"
        assert stored.decision is not None
        assert stored.decision.decision.model_dump()["reason"] == "too risky"
        assert not isinstance(app.screen, ReasonScreen)


async def test_a_reject_needs_a_reason_and_a_quick_pick_fills_it(
    agent: LocalBackend, person: LocalBackend
) -> None:
    """Enter with a blank reason says a reason is required and decides nothing; a quick
    pick's number fills in its reason, which can be edited before Enter rejects with it."""
    request = await call(agent, command="rm -rf build")
    app = InboxApp(person)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("r", "enter", *"   ", "enter")
        assert isinstance(app.screen, ReasonScreen)
        error = str(app.screen.query_one("#dialog-error", Static).content)
        assert error == REASON_REQUIRED
        assert (await status(person, request)).status == "pending"
        await pilot.press("ctrl+u", "2", "enter")
        field = app.screen.query_one("#reason", Input)
        assert isinstance(app.screen, ReasonScreen) and field.value == QUICK_REASONS[1]
        assert not str(app.screen.query_one("#dialog-error", Static).content)
        await pilot.press(*": use --dry-run", "enter")
        await said(pilot, app, "Rejected ")
        stored = (await status(person, request)).decision
        assert stored is not None
        assert stored.decision.model_dump()["reason"] == f"{QUICK_REASONS[1]}: use --dry-run"


async def test_escape_cancels_a_reject(agent: LocalBackend, person: LocalBackend) -> None:
    """Esc in the reason prompt decides nothing, and the inbox keys work again."""
    request = await call(agent, command="ls")
    app = InboxApp(person)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("r", "a", "escape")
        assert not isinstance(app.screen, ReasonScreen)
        assert (await status(person, request)).status == "pending"
        assert app.visible_ids == [request.id]


async def test_e_edits_args_refuses_non_objects_then_approves_the_edit(
    agent: LocalBackend, person: LocalBackend
) -> None:
    """e then Ctrl+R opens the args as JSON; invalid JSON and non-objects are refused; Ctrl+S
    shows the edit to confirm, Enter approves it."""
    request = await call(agent, command="rm -rf /")
    app = InboxApp(person)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("e", "ctrl+r")
        assert isinstance(app.screen, EditArgsScreen)
        editor = app.screen.query_one(TextArea)
        assert '"command": "rm -rf /"' in editor.text
        editor.load_text("[1, 2]")
        await pilot.press("ctrl+s")
        assert isinstance(app.screen, EditArgsScreen)
        error = app.screen.query_one("#dialog-error", Static).content
        assert "must be a JSON object, not list" in str(error)
        editor.load_text("{nope")
        await pilot.press("ctrl+s")
        assert "not valid JSON" in str(app.screen.query_one("#dialog-error", Static).content)
        editor.load_text('{"command": "ls"}')
        await pilot.press("ctrl+s")
        await until(pilot, lambda: isinstance(app.screen, ConfirmEditScreen), "the edit's review")
        await pilot.press("enter")
        await said(pilot, app, "Approved ")
        stored = await status(person, request)
        assert isinstance(stored, ApprovalRequest)
        assert stored.status == "approved"
        assert stored.approved_args == {"command": "ls"}


async def test_e_on_a_call_that_is_not_editable_opens_no_editor(
    agent: LocalBackend, person: LocalBackend
) -> None:
    """editable=false: the detail says so, e says why and opens nothing, a still approves."""
    request = await submit(
        agent, kind="approval", tool_name="shell", tool_args={"command": "make"}, editable=False
    )
    app = InboxApp(person)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.visible_ids == [request.id], "the call is listed")
        assert "not allowed: approve as proposed or reject" in detail_text(app)
        await pilot.press("e")
        assert not isinstance(app.screen, EditArgsScreen)
        await said(pilot, app, "may not be edited")
        assert (await status(person, request)).status == "pending"
        await pilot.press("a")
        await said(pilot, app, "Approved ")


async def test_c_chooses_by_number_and_refuses_other_input(
    agent: LocalBackend, person: LocalBackend
) -> None:
    """c picks an option by its number; a number out of range is refused and the box stays."""
    request = await submit(agent, kind="choice", prompt="Deploy where?", options=["dev", "prod"])
    app = InboxApp(person)
    async with app.run_test(size=SIZE) as pilot:
        assert "1. dev" in detail_text(app) and "2. prod" in detail_text(app)
        await pilot.press("c", "7", "enter")
        assert isinstance(app.screen, ChooseScreen)
        assert "not an option" in str(app.screen.query_one("#dialog-error", Static).content)
        app.screen.query_one(Input).value = ""
        await pilot.press("2", "enter")
        assert not isinstance(app.screen, ChooseScreen)
        await said(pilot, app, "Answered ")
        stored = await status(person, request)
        assert stored.status == "approved"
        assert stored.decision is not None
        assert stored.decision.decision.model_dump()["choice"] == "prod"


async def test_c_multi_select_takes_a_comma_list_and_free_text(
    agent: LocalBackend, person: LocalBackend
) -> None:
    """For multi-select, c takes numbers as a comma list, and free text where allowed."""
    request = await submit(
        agent,
        kind="choice",
        prompt="Which?",
        options=["a", "b", "c"],
        multi_select=True,
        allow_other=True,
    )
    app = InboxApp(person)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("c", *"1,3,zed", "enter")
        await said(pilot, app, "Answered ")
        stored = await status(person, request)
        assert stored.decision is not None
        assert stored.decision.decision.model_dump()["choices"] == ("a", "c", "zed")


async def test_n_answers_each_question_with_feedback(
    agent: LocalBackend, person: LocalBackend
) -> None:
    """n gives one field per question and one for feedback; Enter on the last sends."""
    request = await submit(
        agent,
        kind="questions",
        questions=[{"id": "name", "text": "Name?"}, {"id": "why", "text": "[i]Why?[/i]"}],
    )
    app = InboxApp(person)
    async with app.run_test(size=SIZE) as pilot:
        assert "[i]Why?[/i]" in detail_text(app)
        await pilot.press("n")
        assert isinstance(app.screen, AnswerScreen)
        await pilot.press(*"Ada", "enter", *"because", "enter", *"thanks", "enter")
        assert not isinstance(app.screen, AnswerScreen)
        await said(pilot, app, "Answered Name?")
        stored = await status(person, request)
        assert stored.decision is not None
        answered = stored.decision.decision.model_dump()
        assert answered["type"] == "answer"
        assert answered["answers"] == {"name": "Ada", "why": "because"}
        assert answered["feedback"] == "thanks"


async def test_keys_for_another_kind_say_why_they_do_nothing(
    agent: LocalBackend, person: LocalBackend
) -> None:
    """c and n on an approval, e and a on a choice are refused with a message in words."""
    await call(agent, command="ls")
    app = InboxApp(person)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("c")
        assert "only choice requests can be chosen this way" in app.status_message
        await pilot.press("n")  # said "answerd" before
        assert "only questions requests can be answered this way" in app.status_message
        await submit(agent, kind="choice", prompt="?", options=["x", "y"])
        await until(pilot, lambda: len(app.visible_ids) == 2, "the choice arrives")
        await pilot.press("k")
        await pilot.press("a")
        assert "choose" in app.status_message
        await pilot.press("e")
        assert "only approval requests" in app.status_message
        assert len(app.visible_ids) == 2


async def test_space_selects_and_A_approves_the_selection(
    agent: LocalBackend, person: LocalBackend
) -> None:
    """space toggles batch selection; A approves exactly the selected requests."""
    first = await call(agent, command="one")
    second = await call(agent, command="two")
    third = await call(agent, command="three")
    app = InboxApp(person)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("A")
        assert "nothing selected" in app.status_message
        await pilot.press("space", "j", "space", "j", "space", "space")
        assert app.selected == {third.id, second.id}
        await pilot.press("A")
        await said(pilot, app, "2 approved")
        assert (await status(person, third)).status == "approved"
        assert (await status(person, second)).status == "approved"
        assert (await status(person, first)).status == "pending"
        assert app.visible_ids == [first.id]
        assert app.selected == set()
        assert "2 approved" in app.status_message


async def test_R_rejects_the_selection_with_one_reason(
    agent: LocalBackend, person: LocalBackend
) -> None:
    """R asks for one reason and rejects every selected request with it."""
    first = await call(agent, command="one")
    second = await call(agent, command="two")
    app = InboxApp(person)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("space", "j", "space", "R")
        assert isinstance(app.screen, ReasonScreen)
        await pilot.press(*"no", "enter")
        await said(pilot, app, "2 rejected")
        for request in (first, second):
            stored = await status(person, request)
            assert stored.status == "rejected"
            assert stored.decision is not None
            assert stored.decision.decision.model_dump()["reason"] == "no"
        assert app.visible_ids == []


async def test_h_shows_history_with_who_decided(agent: LocalBackend, person: LocalBackend) -> None:
    """h lists decided requests with the decider and result; it is read-only; h goes back."""
    decided = await call(agent, command="done")
    await LocalBackend(agent.service, APPROVER).decide(decided.id, {"type": "approve"})
    waiting = await call(agent, command="waiting")
    app = InboxApp(person)
    async with app.run_test(size=SIZE) as pilot:
        assert app.visible_ids == [waiting.id]
        await pilot.press("h")
        assert app.history
        assert app.visible_ids == [decided.id]
        row = app.query_one("#requests", OptionList).get_option(decided.id).prompt
        assert isinstance(row, Text)
        assert "approved" in row.plain and "alice" in row.plain
        assert "approve by alice" in detail_text(app)
        await pilot.press("a")
        assert "read-only" in app.status_message
        await pilot.press("h")
        assert app.visible_ids == [waiting.id]


async def test_question_mark_shows_help_and_q_quits(person: LocalBackend) -> None:
    """? opens a help screen naming every key, Esc closes it, and q quits the app."""
    app = InboxApp(person)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        keys = str(app.screen.query_one("#help-keys", Static).content)
        for key in ("j / ↓", "space", "A", "R", "?", "q"):
            assert key in keys
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        footer = {key for key, active in app.active_bindings.items() if active.binding.show}
        assert {"j", "k", "a", "r", "e", "c", "n", "space", "A", "R", "h"} <= footer
        assert {"question_mark", "q"} <= footer
        await pilot.press("q")
        await pilot.pause()
        assert not app.is_running


async def test_new_requests_appear_and_decided_ones_leave_live(
    agent: LocalBackend, person: LocalBackend
) -> None:
    """Requests submitted and decided elsewhere while the app runs update the list by themselves."""
    app = InboxApp(person)
    async with app.run_test(size=SIZE) as pilot:
        assert app.visible_ids == []
        request = await call(agent, command="fresh")
        await until(pilot, lambda: app.visible_ids == [request.id], "the new request shows")
        assert '"command": "fresh"' in detail_text(app)
        await LocalBackend(agent.service, APPROVER).decide(request.id, {"type": "approve"})
        await until(pilot, lambda: app.visible_ids == [], "the decided request leaves")


class RacedBackend(LocalBackend):
    """A person's backend where someone else decides a request just before each decision."""

    async def decide(
        self, request_id: str, decision: Decision | Mapping[str, Any], **how: Any
    ) -> Request:
        await self.service.decide(request_id, {"type": "reject", "reason": "mine"}, APPROVER)
        return await super().decide(request_id, decision, **how)


async def test_a_conflicting_decision_is_shown_and_the_app_keeps_running(
    agent: LocalBackend, svc: Service
) -> None:
    """Deciding a request someone else decided shows the error; the app carries on."""
    request = await call(agent, command="ls")
    later = await call(agent, command="pwd")
    app = InboxApp(RacedBackend(svc, ADMIN))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("j", "a")
        assert request.id in app.status_message
        assert "is rejected, not pending" in app.status_message
        assert app.is_running
        await until(pilot, lambda: app.visible_ids == [later.id], "the decided one leaves")
        stored = await svc.get(request.id, ADMIN)
        assert stored.decision is not None and stored.decision.decided_by == "alice"


async def test_over_http_requests_arrive_live_and_are_decided(
    agent: LocalBackend, svc: Service
) -> None:
    """Against a server (AsyncClient over the HTTP API) the list is live and a decides."""
    app_server = create_app(svc, sweep=False, heartbeat=0.5)
    token, _ = await svc.create_token(APPROVER.name, APPROVER.role)
    transport = httpx.ASGITransport(app=app_server)
    async with AsyncClient("http://signoff.test", token, transport=transport) as client:
        app = InboxApp(client)
        async with app.run_test(size=SIZE) as pilot:
            first = await call(agent, command="maybe before the stream connected")
            await until(pilot, lambda: app.visible_ids == [first.id], "the re-read finds it")
            request = await call(agent, command="remote")
            await until(pilot, lambda: app.visible_ids[0] == request.id, "the request arrives")
            assert app.current is not None and app.current.id == first.id  # the cursor stays
            await pilot.press("a")
            await until(pilot, lambda: app.visible_ids == [request.id], "the approved one leaves")
            await pilot.press("a")
            await until(pilot, lambda: app.visible_ids == [], "the second one leaves")
            for done in (first, request):
                assert (await svc.get(done.id, ADMIN)).status == "approved"


def test_inbox_command_registers_and_checks_its_options() -> None:
    """register() adds ``inbox``; --server without a token fails with one error line."""
    app = typer.Typer()
    register(app)
    app.command("noop")(lambda: None)
    runner = CliRunner()
    shown = runner.invoke(app, ["inbox", "--help"])
    assert shown.exit_code == 0 and "--server" in shown.output
    failed = runner.invoke(app, ["inbox", "--server", "http://x.test"], env={"SIGNOFF_TOKEN": ""})
    assert failed.exit_code == 3
    assert "--server needs --token" in failed.output
